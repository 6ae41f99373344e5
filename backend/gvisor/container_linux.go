package gvisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/cgroup"
)

// container is one runsc container being set up or running: its
// directory (the bundle, runsc's state, its logs, the proxy's socket),
// the config written into the bundle and the flags every runsc call on
// it takes. One-shot runs and sessions build it the same way (prepare);
// they differ only in the container's first process.
type container struct {
	// runsc is the runsc binary as named, which check checks; exe is
	// what is run: runsc itself, or the copy of the bytes a trust check
	// hashed (Backend.Checked).
	runsc, exe string
	// check is Backend.Check, for each command of a session.
	check func(runsc string) error
	dir   string // removed by remove
	bdir  string // the bundle
	state string // runsc's --root
	id    string
	cfg   *specs.Spec
	// global are the flags of every runsc call but --log: concurrent
	// calls log to files of their own.
	global []string
	// ln is the proxy's listener in network mode proxy, closed by remove.
	ln net.Listener
	// cg holds the sandbox's processes under its memory and CPU limits
	// (cgroup_linux.go); nil without them.
	cg *cgroup.Cgroup
	// reaperStarted waits until the reaper's start has ended.
	reaperStarted func()
	// watched are the host paths of the protections (protectwatch_linux.go).
	watched []string
	// stage holds the mount points of the protected paths' sources, and
	// trees their clones, which the gate mounts there (pin_linux.go);
	// the clones are closed once the gate has them.
	stage string
	trees []*os.File
}

// prepare checks spec, finds runsc, sweeps what dead moats left and
// makes the container's directory and bundle; the caller sets the first
// process (cfg.Process.Args, and its user where it is not the command)
// and calls write. self binds moat's own binary at forwardPath (always in
// network mode proxy). On error nothing of it remains.
func (b *Backend) prepare(spec *backend.Spec, stdio backend.Stdio, self bool) (_ *container, err error) {
	if gaps := unsupported(spec); len(gaps) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, strings.Join(gaps, "; "))
	}
	runsc := b.Runsc
	if runsc == "" {
		if runsc, err = Find(""); err != nil {
			return nil, err
		}
	}
	if b.Check != nil {
		if err := b.Check(runsc); err != nil {
			return nil, &backend.InitError{Stage: "runsc", Err: err}
		}
	}
	exe := runsc
	if b.Checked != nil {
		if digest, ok := b.Checked(runsc); ok {
			if exe, err = checkedCopy(runsc, digest); err != nil {
				return nil, &backend.InitError{Stage: "runsc", Err: err}
			}
		}
	}
	sweep(exe)
	tmp, err := filepath.Abs(os.TempDir())
	if err != nil {
		return nil, &backend.InitError{Stage: "bundle", Err: err}
	}
	// Before the directory exists: the reaper then finds it whenever
	// moat dies.
	reaperStarted, err := watchForReaper(tmp, exe)
	if err != nil {
		return nil, &backend.InitError{Stage: "bundle", Err: err}
	}
	dir, err := os.MkdirTemp(tmp, fmt.Sprintf("moat-gvisor-%d-", os.Getpid()))
	if err != nil {
		return nil, &backend.InitError{Stage: "bundle", Err: err}
	}
	c := &container{runsc: runsc, exe: exe, check: b.Check, dir: dir, bdir: filepath.Join(dir, "bundle"), state: filepath.Join(dir, "state"), reaperStarted: reaperStarted}
	defer func() {
		if err != nil {
			c.remove()
		}
	}()
	for _, d := range []string{c.bdir, c.state} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, &backend.InitError{Stage: "bundle", Err: err}
		}
	}
	if c.cg, err = limitCgroup(spec); err != nil {
		return nil, err
	}
	if c.cg != nil {
		if err := writeCgroupFile(dir, c.cg); err != nil {
			return nil, &backend.InitError{Stage: "cgroup", Err: err}
		}
	}
	if spec, err = mountOverlays(spec, dir); err != nil {
		return nil, err
	}
	if c.cfg, err = bundle(spec, c.bdir, c.pin, func(h string) { c.watched = append(c.watched, h) }); err != nil {
		return nil, &backend.InitError{Stage: "bundle", Err: err}
	}
	network := "none"
	if spec.Network.Mode == backend.NetHost {
		network = "host"
	}
	// The sandbox's root is the bundle's empty, read-only rootfs with the
	// Spec's mounts on it, so gVisor's own overlay over the root would
	// only cost start-up time; cgroups are not used (Capabilities).
	c.global = []string{"--root", c.state, "--log-format", "json", "--network", network, "--overlay2", "none", "--ignore-cgroups"}
	if self || spec.Network.Mode == backend.NetProxy {
		exe, err := os.Executable()
		if err != nil {
			return nil, &backend.InitError{Stage: "bundle", Err: err}
		}
		c.cfg.Mounts = append(c.cfg.Mounts, bind(exe, forwardPath, true))
	}
	if spec.Network.Mode == backend.NetProxy {
		// The proxy's way in: moat's own binary as the container's
		// first process (forward_linux.go) and a unix socket served by
		// moat's proxy, both bound in; runsc lets the sandbox connect to
		// a host socket only with --host-uds.
		if stdio.ServeProxy == nil {
			return nil, &backend.InitError{Stage: "proxy", Err: errors.New("network mode proxy without a proxy to serve it")}
		}
		sock := filepath.Join(dir, "proxy.sock")
		if c.ln, err = net.Listen("unix", sock); err != nil {
			return nil, &backend.InitError{Stage: "proxy", Err: err}
		}
		// The sandbox's users connect to it; the directory above keeps
		// everyone else on the host out.
		if err := os.Chmod(sock, 0o777); err != nil {
			return nil, &backend.InitError{Stage: "proxy", Err: err}
		}
		go stdio.ServeProxy(c.ln)
		c.cfg.Mounts = append(c.cfg.Mounts, bind(sock, socketPath, false))
		c.global = append(c.global, "--host-uds=open")
	}
	if c.cfg.Linux.Seccomp != nil {
		c.global = append(c.global, "--oci-seccomp")
	}
	c.id = "moat-" + spec.RunID
	if spec.RunID == "" {
		c.id = "moat-" + filepath.Base(dir)
	}
	return c, nil
}

// proxyArgs are the forwarder's arguments in network mode proxy (PORT
// SOCKET), none otherwise.
func proxyArgs(spec *backend.Spec) []string {
	if spec.Network.Mode != backend.NetProxy {
		return nil
	}
	return []string{strconv.Itoa(spec.Network.ProxyPort), socketPath}
}

// write writes the bundle's config.json.
func (c *container) write() error {
	data, err := json.Marshal(c.cfg)
	if err != nil {
		return &backend.InitError{Stage: "bundle", Err: err}
	}
	if err := os.WriteFile(filepath.Join(c.bdir, "config.json"), data, 0o600); err != nil {
		return &backend.InitError{Stage: "bundle", Err: err}
	}
	return nil
}

// cmd is a runsc call on the container, logging to logPath.
func (c *container) cmd(logPath string, args ...string) *exec.Cmd {
	all := append(append([]string{}, c.global...), "--log", logPath)
	return exec.Command(c.exe, append(all, args...)...)
}

// checked reports whether runsc passes Backend.Check now. A call that
// ends the sandbox (kill, delete) and finds it changed does without
// runsc: it kills runsc's process group instead, as when the container
// is not there yet. A changed runsc is not run at all, even to end a
// sandbox: it would run as this process's user, which may be root.
func (c *container) checked() bool {
	return c.check == nil || c.check(c.runsc) == nil
}

// deleteIfLeft deletes the container with runsc when its state is still
// there (a run cut short, a session's end): another runsc call is not
// free, so it is made only then.
func (c *container) deleteIfLeft() {
	if !c.checked() {
		return
	}
	entries, _ := os.ReadDir(c.state)
	for _, e := range entries {
		if e.Name() != "null-netns" {
			c.cmd(os.DevNull, "delete", "--force", c.id).Run()
			return
		}
	}
}

// remove removes the container's directory and closes the proxy's
// listener; the container must be gone.
func (c *container) remove() {
	if c.ln != nil {
		c.ln.Close()
	}
	c.closeTrees()
	if c.cg != nil {
		c.cg.Kill()
		c.cg.Destroy()
	}
	removeRunDir(c.dir)
	c.reaperStarted()
}

// attrs are the process attributes of every long-lived runsc process
// moat starts: a process group of its own (a kill of it reaches nothing
// else) and death with its moat.
func attrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
