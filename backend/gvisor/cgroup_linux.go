package gvisor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/cgroup"
)

// The memory and CPU limits of a gvisor sandbox bound the host processes
// that are the sandbox: runsc, its gofer and its sandbox process (the
// sentry, whose memory holds the commands' memory and the sandbox's
// tmpfs). moat puts them in a cgroup of its own making, the native
// backend's (internal/cgroup: v1, v2, stats, kill, sweep), rather than
// letting runsc make one: runsc runs with --ignore-cgroups, and starts
// inside moat's cgroup through a gate (gateArg0) that waits until moat
// has added it, so that nothing it forks starts outside. The limit is
// the whole sandbox's: past the memory limit the kernel's OOM killer ends
// the sentry, and with it every process of the sandbox.

// gateArg0 names moat's own binary started as the gate: it waits for one
// byte on fd 3, mounts the protected paths' staged sources it is given
// (pin_linux.go), then becomes runsc (its arguments).
const gateArg0 = "moat-gvisor-gate"

func capabilities() backend.Capabilities {
	info := cgroup.Probe()
	return backend.Capabilities{
		Memory: info.Usable["memory"], MemoryWhy: info.Why["memory"],
		CPU: info.Usable["cpu"], CPUWhy: info.Why["cpu"],
		PidsWhy: pidsWhy, Delegation: info.HowTo,
		LandlockWhy: landlockWhy,
	}
}

// limitCgroup makes the cgroup of spec's memory and CPU limits; nil when
// spec sets neither.
func limitCgroup(spec *backend.Spec) (*cgroup.Cgroup, error) {
	l := spec.Limits
	if l.MemoryBytes <= 0 && l.CPUs <= 0 {
		return nil, nil
	}
	// Cgroups a SIGKILLed moat could not remove are swept first (only
	// empty ones).
	cgroup.Sweep("moat-")
	cg, err := cgroup.New("moat-"+spec.RunID, cgroup.Limits{MemoryBytes: l.MemoryBytes, CPUs: l.CPUs})
	if err != nil {
		return nil, &backend.InitError{Stage: "cgroup", Err: err}
	}
	return cg, nil
}

// start starts cmd, a runsc call, inside the container's cgroup when it
// has one, and with its protected paths' sources staged when it has them
// (pin_linux.go): through the gate, added to the cgroup before it becomes
// runsc.
func (c *container) start(cmd *exec.Cmd) error {
	if c.cg == nil && len(c.trees) == 0 {
		return cmd.Start()
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if len(cmd.ExtraFiles) > 0 {
		return errors.New("start runsc through the gate: the call passes files of its own")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer w.Close()
	// The gate's status: its exec of runsc closes the write end (the
	// gate marks it close-on-exec), or the gate writes why it stopped
	// there, so that a failure of its own is not taken for runsc's.
	sr, sw, err := os.Pipe()
	if err != nil {
		r.Close()
		return err
	}
	defer sr.Close()
	cmd.Args = append([]string{gateArg0, strconv.Itoa(len(c.trees)), c.stage}, cmd.Args...)
	cmd.Path = self
	cmd.ExtraFiles = append([]*os.File{r, sw}, c.trees...)
	err = cmd.Start()
	r.Close()
	sw.Close()
	// The gate holds the clones now: closed here, they stay until it has
	// mounted them (or ended).
	c.closeTrees()
	if err != nil {
		return err
	}
	if c.cg != nil {
		if err := c.cg.Add(cmd.Process.Pid); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return err
		}
	}
	if _, err := w.Write([]byte{1}); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("start runsc through the gate: %w", err)
	}
	msg, _ := io.ReadAll(io.LimitReader(sr, 4096))
	if len(msg) > 0 {
		cmd.Process.Kill()
		cmd.Wait()
		return errors.New(strings.TrimSpace(string(msg)))
	}
	return nil
}

// closeTrees closes the staged sources' clones (see container.trees).
func (c *container) closeTrees() {
	for _, f := range c.trees {
		f.Close()
	}
	c.trees = nil
}

// gate waits for moat's word on fd 3, mounts the N staged sources it was
// given (fds 5 and up) in DIR, and becomes runsc: its arguments are N DIR
// RUNSC [ARGS...]. Without the word (moat died, or could not add it to
// the cgroup) it ends; when it cannot go on, it says why on fd 4.
func gate() int {
	f := os.NewFile(3, "gate")
	syscall.CloseOnExec(4)
	status := os.NewFile(4, "gate status")
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(status, format, args...)
		return code
	}
	b := make([]byte, 1)
	if n, _ := f.Read(b); n != 1 || len(os.Args) < 4 {
		return 125
	}
	f.Close()
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 0 {
		return fail(125, "the gate: %q is not a count of staged sources", os.Args[1])
	}
	if n > 0 {
		// The namespace is this thread's, and the exec below, from this
		// thread, takes it into runsc.
		runtime.LockOSThread()
		if err := stageTrees(n, os.Args[2]); err != nil {
			return fail(125, "stage the protected paths: %v", err)
		}
	}
	err = syscall.Exec(os.Args[3], os.Args[3:], os.Environ())
	if errors.Is(err, syscall.ENOENT) {
		return fail(127, "exec %s: %v", os.Args[3], err)
	}
	return fail(126, "exec %s: %v", os.Args[3], err)
}
