// Package pollwait lets a goroutine wait for a file descriptor that Go
// does not wrap (a seccomp listener, a TUN device) in the runtime's
// network poller, so that the wait holds no thread: a daemon has such a
// wait per session, most of them idle, and a blocking poll(2) each would
// hold as many threads.
//
// It refuses nothing and owns only the duplicates it makes: the caller
// keeps its fd. Where the poller cannot take a descriptor, Dup says so and
// the caller falls back to waiting as it did before.
package pollwait

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Dup returns a non-blocking duplicate of fd (close-on-exec) in the
// runtime's poller, named name, or an error when the poller cannot take
// it. O_NONBLOCK is a flag of the open file, so fd is non-blocking too
// afterwards.
func Dup(fd int, name string) (*os.File, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return nil, err
	}
	f := os.NewFile(uintptr(dup), name)
	// Only a file in the poller has deadlines.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Now is poll(2) of fd for reading, without waiting: its revents (0 when
// nothing is there). The poller is edge-triggered, so a wait on a Dup's
// RawConn asks Now first and waits for an edge only when it gives 0.
func Now(fd uintptr) (int16, error) {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(pfd, 0)
		if err != unix.EINTR {
			return pfd[0].Revents, err
		}
	}
}

// Gone reports whether revents say the other end has gone (hang-up, error,
// or an invalid fd).
func Gone(revents int16) bool {
	return revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
}
