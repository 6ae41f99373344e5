// Package sandboxtest helps the tests of programs built on moat (moat's
// own command among them), as net/http/httptest does for HTTP: it keeps
// their runs' state out of the machine's state directory, finds host
// processes to check that nothing a sandbox started outlives it, and
// makes the test process look like a host that lacks a kernel feature.
// It is for tests only: nothing in it belongs in a program that runs
// sandboxes for real.
package sandboxtest

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/moatbox/moat/internal/proctest"
	"github.com/moatbox/moat/internal/seccomp"
)

// RunWithStateDir runs m with MOAT_STATE_DIR set to a temporary directory
// (removed afterwards) unless it is set already, and returns m.Run's code.
func RunWithStateDir(m interface{ Run() int }) int { return proctest.RunWithStateDir(m) }

// Find returns the pids of host processes whose command line (arguments
// joined by spaces) contains s.
func Find(s string) []int { return proctest.Find(s) }

// Gone waits up to within for find to return nothing, and returns what it
// last returned.
func Gone(find func() []int, within time.Duration) []int { return proctest.Gone(find, within) }

// WithoutSyscall makes the named system call fail with errno in the
// calling process and the children it starts afterwards: ENOSYS as on a
// kernel that predates it, EPERM as where a policy forbids it. It locks
// the calling goroutine to its thread and sets no_new_privs; call it
// first thing in a process made for the test (a re-executed test binary).
func WithoutSyscall(name string, errno syscall.Errno) error {
	return install(name, []seccomp.Rule{{Names: []string{name}, Action: seccomp.Errno, Errno: uint32(errno)}})
}

// WithoutUserNamespaces refuses new user namespaces with EPERM, as
// Ubuntu's AppArmor restriction or kernel.unprivileged_userns_clone=0 do:
// clone with CLONE_NEWUSER fails, and clone3, whose flags a filter cannot
// read, answers ENOSYS so that Go falls back to clone. As WithoutSyscall,
// for a process made for the test.
func WithoutUserNamespaces() error {
	const newUser = 0x10000000 // CLONE_NEWUSER
	return install("user namespaces", []seccomp.Rule{
		{Names: []string{"clone"}, Action: seccomp.Errno, Errno: uint32(syscall.EPERM),
			Args: []seccomp.Arg{{Index: 0, Op: seccomp.MaskedEQ, Value: newUser, ValueTwo: newUser}}},
		{Names: []string{"clone3"}, Action: seccomp.Errno, Errno: uint32(syscall.ENOSYS)},
		{Names: []string{"unshare"}, Action: seccomp.Errno, Errno: uint32(syscall.EPERM),
			Args: []seccomp.Arg{{Index: 0, Op: seccomp.MaskedEQ, Value: newUser, ValueTwo: newUser}}},
	})
}

func install(name string, rules []seccomp.Rule) error {
	prog, err := seccomp.Compile(&seccomp.Profile{DefaultAction: seccomp.Allow, Rules: rules}, seccomp.NativeArch())
	if err != nil {
		return fmt.Errorf("filter %s: %w", name, err)
	}
	runtime.LockOSThread()
	if err := setNoNewPrivs(); err != nil {
		return fmt.Errorf("filter %s: no_new_privs: %w", name, err)
	}
	if err := seccomp.Install(prog); err != nil {
		return fmt.Errorf("filter %s: %w", name, err)
	}
	return nil
}

// ExitOn is for TestMain: it prints err and exits 99, the code the tests
// read as a failed set-up.
func ExitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "test set-up:", err)
		os.Exit(99)
	}
}
