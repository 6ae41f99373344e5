package gvisor

import (
	"fmt"

	"github.com/moatbox/moat/backend"
)

// Backend runs Specs under runsc. The zero value finds runsc with
// Find(""). Runs may be concurrent: each has its own bundle and runsc
// state directory.
type Backend struct {
	// Runsc is the runsc binary; empty means Find("").
	Runsc string
	// Check, when set, is called with the runsc binary before each time
	// a run or session would run it: an error refuses a start or a
	// session's command, skips a session's stats, and has a kill or
	// delete done without runsc (its process group killed). The sandbox
	// package checks there that a trusted policy's runsc is still the
	// one its trust hashed (policy.Policy.VerifyPrograms), which it was
	// when the policy was loaded, perhaps long before. Not checked: the
	// sweep of what dead moats left, which runs the runsc a start just
	// checked, and the reaper, which runs once moat is dead.
	Check func(runsc string) error
	// Checked, when set, returns the digest a trust check hashed for the
	// runsc binary (policy.Policy.CheckedDigest), if it hashed one. With
	// one, the file at runsc is never run: Check hashes it by path, and a
	// file swapped in right after the check would run in its place. A
	// private copy with exactly that content runs instead (checkedCopy),
	// made once per digest; a runsc that no longer has it when the copy
	// is made is refused (ErrRunscChanged).
	Checked func(runsc string) (digest string, ok bool)
}

// Name is "gvisor".
func (*Backend) Name() string { return "gvisor" }

// Capabilities: memory and CPU limits where this caller can make cgroups
// (the sandbox's runsc processes, which do all its work, run in one);
// never a process limit, nor Landlock (see Unsupported).
func (*Backend) Capabilities() backend.Capabilities { return capabilities() }

// pidsWhy is why the gvisor backend has no process limit.
const pidsWhy = "the gvisor backend has no process limit: the sandbox's processes are the sentry's, and a host cgroup's pids limit would count the sentry's threads instead (--isolation native has one)"

// landlockWhy is why a gvisor sandbox has no Landlock, whatever the
// host's kernel has.
const landlockWhy = "the gvisor backend has no Landlock (gVisor's kernel, which serves the command's system calls, has none)"

// NoTUN says why a gvisor sandbox has no TUN device (transparent
// egress): the sandbox package then runs it with the proxy alone.
func (*Backend) NoTUN() string {
	return "the gvisor backend: the sandbox's network is gVisor's own, with loopback only"
}

// NoExecCheck says why a gvisor sandbox cannot have the programs started
// inside it checked (Stdio.CheckExec): gVisor's kernel does not pass a
// seccomp user notification on to moat, so nothing outside the sandbox
// hears of an execve there. Run, Create and Exec refuse a Stdio with
// CheckExec (ErrNoExecCheck); the sandbox package asks this first, to say
// so, or to run with the command lines checked only when degradation is
// allowed.
func (*Backend) NoExecCheck() string {
	return "the gvisor backend cannot check the programs a command starts (gVisor's kernel passes no seccomp user notification to moat)"
}

// refuseExecCheck is the error for a Stdio that asks for exec checks.
func refuseExecCheck(stdio backend.Stdio) error {
	if stdio.CheckExec == nil {
		return nil
	}
	return fmt.Errorf("%w: %s", backend.ErrNoExecCheck, (*Backend)(nil).NoExecCheck())
}
