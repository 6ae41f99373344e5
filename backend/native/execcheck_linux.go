package native

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/hostinfo"
	"github.com/moatbox/moat/internal/seccomp"
)

// Checking each exec (Stdio.CheckExec). The observed filter also sends
// every execve and execveat to the host (seccomp.WithExecNotify), whose
// supervisor reads the program's path and argv from the caller's memory
// and asks CheckExec; the call then goes on untouched
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE) or fails with EACCES. A process has
// one listener, so the check rides on the filter that is observed anyway.
// The rules that decide live on the host, so only a start whose listener
// reaches the host can check: the direct start. And the listener must
// reach the host before the command's own first exec, which waits for an
// answer: init sends it before it forks the command, not after.

// execObserved returns which of filters carries the listener and the exec
// check, or an error wrapping backend.ErrNoExecCheck naming what is
// missing.
func execObserved(spec *backend.Spec, filters [][]seccomp.Instruction, direct bool) (int, error) {
	fail := func(why string) (int, error) {
		return -1, fmt.Errorf("%w: %s", backend.ErrNoExecCheck, why)
	}
	if major, minor := hostinfo.KernelVersion(); major < 5 || major == 5 && minor < 5 {
		return fail(fmt.Sprintf("Linux %d.%d lacks SECCOMP_USER_NOTIF_FLAG_CONTINUE (5.5)", major, minor))
	}
	if !direct {
		return fail("this run needs the init stage (an overlay workspace under a disk limit, or filters that refuse the direct start's own calls), whose seccomp supervisor runs inside the sandbox, away from the rules")
	}
	if len(filters) == 0 {
		return fail("the exec check rides on a seccomp filter, and syscalls.profile is \"unconfined\"")
	}
	if !spec.SeccompAtExec {
		return 0, nil
	}
	// A custom profile is installed by the command itself, after init
	// has forked it: the floor under it, installed by init, carries the
	// check instead (and the custom profile's own refusals go unreported).
	if len(filters) < 2 {
		return fail("a custom seccomp profile is installed by the command, too late to hand its listener over, and there is no filter under it")
	}
	return 1, nil
}

// execChecker is the supervisor's Exec for stdio.CheckExec. A program
// that does not exist fails with ENOENT unasked: a shell searching its
// PATH tries each directory in turn, and neither the rules nor a person
// should see the misses.
func execChecker(check func(context.Context, backend.ExecCall) error) func(context.Context, seccomp.ExecCall) int {
	return func(ctx context.Context, c seccomp.ExecCall) int {
		if missing(c) {
			return int(unix.ENOENT)
		}
		if err := check(ctx, backend.ExecCall{Pid: c.Pid, Path: c.Path, Argv: c.Argv, Truncated: c.Truncated}); err != nil {
			return int(unix.EACCES)
		}
		return 0
	}
}

// missing reports whether the program c names is certainly absent from
// the caller's view: its path, resolved in the caller's root (or from its
// working directory), is not there. Either answer fails closed: a
// program wrongly found is checked, one wrongly missed does not run.
func missing(c seccomp.ExecCall) bool {
	if c.Path == "" || c.Dirfd != unix.AT_FDCWD {
		return false // an fexecve, or a path relative to a directory fd
	}
	proc := "/proc/" + strconv.Itoa(c.Pid)
	base, how := proc+"/root", unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT}
	if !strings.HasPrefix(c.Path, "/") {
		base, how.Resolve = proc+"/cwd", 0
	}
	dir, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, c.Path, &how)
	if err == nil {
		unix.Close(fd)
	}
	return err == unix.ENOENT || err == unix.ENOTDIR
}
