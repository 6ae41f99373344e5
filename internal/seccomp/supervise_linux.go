package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// InstallObserved installs Observed(prog) like Install, with a listener,
// and returns the listener fd (close-on-exec) for Supervise. At most one
// filter of a process can have a listener.
func InstallObserved(prog []Instruction) (int, error) {
	if err := checkInstall(prog); err != nil {
		return -1, err
	}
	obs := Observed(prog)
	fprog := unix.SockFprog{Len: uint16(len(obs)), Filter: &obs[0]}
	flags := unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH | unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, uintptr(flags), uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(obs)
	if errno != 0 {
		return -1, fmt.Errorf("seccomp: install observed filter: %w", errno)
	}
	return int(fd), nil
}

// seccompNotif and seccompNotifResp are struct seccomp_notif and
// struct seccomp_notif_resp.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// Supervise answers the notifications of a filter installed with
// InstallObserved until fd is closed or no process uses the filter any
// more: each refused call gets the errno prog (the original program)
// gives it, and is passed to record. It blocks; run it in a goroutine.
func Supervise(fd int, prog []Instruction, record func(nr int, errno int)) {
	SuperviseUntil(fd, -1, prog, record)
}

// SuperviseUntil is Supervise for a process that outlives the filter's
// users (the host of a sandbox): it also returns once no process uses the
// filter, or once stop (a pipe's read end; -1 for none) is readable or
// closed at the other end. A receive blocked in the kernel would wait for
// ever after the last user is gone, so it polls first: the listener is
// readable only once a notification has been queued, and then a receive
// returns at once (ENOENT if its caller has died since).
func SuperviseUntil(fd, stop int, prog []Instruction, record func(nr int, errno int)) {
	for {
		if stop >= 0 {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(stop), Events: unix.POLLIN}}
			if _, err := unix.Poll(pfd, -1); err != nil {
				if err == unix.EINTR {
					continue
				}
				return
			}
			if pfd[1].Revents != 0 || pfd[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				return
			}
			if pfd[0].Revents&unix.POLLIN == 0 {
				continue
			}
		}
		var req seccompNotif
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&req))); errno != 0 {
			if errno == unix.EINTR || errno == unix.ENOENT {
				// ENOENT: the caller died before its call was read. Stopping
				// here would leave every later refused call waiting for an
				// answer that never comes.
				continue
			}
			return // the listener is gone
		}
		errNo := eperm
		ret, err := Evaluate(prog, req.nr, req.arch, req.ip, req.args)
		if e, ok := ErrnoOf(ret); err == nil && ok {
			errNo = e
		}
		// Recorded before answering: once answered, the command may exit
		// and init report at once.
		record(int(req.nr), errNo)
		resp := seccompNotifResp{id: req.id, error: -int32(errNo)}
		unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
	}
}
