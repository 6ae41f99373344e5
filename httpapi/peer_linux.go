package httpapi

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// peer is what the kernel says of the process at the other end of c, as
// it recorded it when the connection was made (SO_PEERCRED): its uid, and
// why it may not use the socket ("" if it may).
//
// A caller in another user namespace than the daemon's is refused: every
// moat sandbox runs in one of its own, so a command that reaches a
// daemon's socket (of another state directory, or a daemon started after
// the run began, which the run's start-time check cannot know of) would
// otherwise make sessions under a policy of its choosing, as the user.
// The namespace is read through /proc by pid: a peer gone before it is
// read is refused, never let through; so is one whose pid may have been
// reused (see below).
func peer(c *net.UnixConn) (uid int, refused string, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, "", err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, "", err
	}
	if serr != nil {
		return -1, "", serr
	}
	// The pid is the connecting process's, which may have passed the
	// connection on and ended, its pid then reused by a process of the
	// host (a sandbox can wrap the pid counter, and hold this accept back
	// by filling the daemon's fds). Where the kernel gives a pidfd of that
	// very process (SO_PEERPIDFD), the namespace read by pid counts only
	// if that process is still alive once it was read: its pid cannot
	// have been reused meanwhile.
	pidfd, perr := -1, error(nil)
	raw.Control(func(fd uintptr) {
		pidfd, perr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	})
	switch {
	case perr == nil:
		defer unix.Close(pidfd)
	case errors.Is(perr, unix.EMFILE) || errors.Is(perr, unix.ENFILE):
		// No descriptor for the pidfd: the daemon is short, not the
		// caller gone (a tenant holding the daemon's fds made every
		// caller look like one that had ended, found by a tester).
		return -1, "", perr
	case errors.Is(perr, unix.ENOPROTOOPT):
		// Before Linux 6.5: the pid alone (a documented limitation).
		pidfd = -1
	default:
		// A kernel that has the option but gives no pidfd: the process
		// is gone (reaped, before kernels that keep its pidfd), and its
		// pid may be another's already.
		return int(cred.Uid), "the calling process ended before it could be checked", nil
	}
	refused = foreignNamespace(int(cred.Pid))
	if refused == "" && pidfd >= 0 && unix.PidfdSendSignal(pidfd, 0, nil, 0) != nil {
		refused = "the calling process ended before it could be checked"
	}
	return int(cred.Uid), refused, nil
}

// foreignNamespace says why process pid may not use the socket: it is in
// another user namespace than this process, or cannot be seen.
func foreignNamespace(pid int) string {
	if pid <= 0 {
		return "the calling process is outside the daemon's PID namespace"
	}
	var own, its unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &own); err != nil {
		return fmt.Sprintf("the daemon's user namespace cannot be read: %v", err)
	}
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/user", pid), &its); err != nil {
		if os.IsNotExist(err) || err == syscall.ESRCH {
			return "the calling process ended before it could be checked"
		}
		if os.IsPermission(err) {
			// A process of another user, root's included, or one that
			// forbids inspection (not dumpable), whose /proc this
			// daemon's user may not look into.
			return "the daemon cannot tell whether the calling process runs in a sandbox: it may not look at that process (another user's, or one that forbids inspection); connect as the daemon's own user, from an ordinary process"
		}
		return fmt.Sprintf("the calling process's user namespace cannot be read: %v", err)
	}
	if own.Dev != its.Dev || own.Ino != its.Ino {
		return "the calling process is in another user namespace than the daemon (a sandbox's: a command moat runs may not drive the daemon)"
	}
	return ""
}
