package gvisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
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
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer w.Close()
	cmd.Args = append([]string{gateArg0, strconv.Itoa(len(c.trees)), c.stage}, cmd.Args...)
	cmd.Path = self
	if len(cmd.ExtraFiles) > 0 {
		return errors.New("start runsc through the gate: the call passes files of its own")
	}
	cmd.ExtraFiles = append([]*os.File{r}, c.trees...)
	err = cmd.Start()
	r.Close()
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
// given (fds 4 and up) in DIR, and becomes runsc: its arguments are N DIR
// RUNSC [ARGS...]. Without the word (moat died, or could not add it to
// the cgroup) it ends.
func gate() int {
	f := os.NewFile(3, "gate")
	b := make([]byte, 1)
	if n, _ := f.Read(b); n != 1 || len(os.Args) < 4 {
		return 125
	}
	f.Close()
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 0 {
		fmt.Fprintf(os.Stderr, "moat: gate: %q is not a count of staged sources\n", os.Args[1])
		return 125
	}
	if n > 0 {
		// The namespace is this thread's, and the exec below, from this
		// thread, takes it into runsc.
		runtime.LockOSThread()
		if err := stageTrees(n, os.Args[2]); err != nil {
			fmt.Fprintf(os.Stderr, "moat: stage the protected paths for runsc: %v\n", err)
			return 125
		}
	}
	err = syscall.Exec(os.Args[3], os.Args[3:], os.Environ())
	fmt.Fprintf(os.Stderr, "moat: exec runsc: %v\n", err)
	if errors.Is(err, syscall.ENOENT) {
		return 127
	}
	return 126
}
