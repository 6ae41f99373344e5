package pipefd

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// LazyPipe gives a command src, a pipe it may not hold itself (see
// Passable), through a pipe of its own that takes from src only what the
// command reads: the data is copied with tee(2), which leaves it in src,
// and taken from src once the command has read it (FIONREAD on the new
// pipe says how much it has). So a command that reads nothing, or part,
// leaves the rest of src to whoever reads it next, as it would holding
// src itself: a shell reading its script from the pipe that `moat run`
// shares (`... | bash`), a `while read` loop. A plain copy read ahead and
// lost what the command did not read.
//
// r is the read end for the command; finish, called once the command has
// ended, takes from src what it read, closes the write end and waits for
// the relay to end. src is never put into non-blocking mode (its file
// description is shared with the caller's shell).
func LazyPipe(src *os.File) (r *os.File, finish func(), err error) {
	sc, err := src.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	var srcFd int
	if err := sc.Control(func(fd uintptr) { srcFd = int(fd) }); err != nil {
		return nil, nil, err
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, lazyChunk) // best effort: a bigger chunk per round
	rd := os.NewFile(uintptr(p[0]), "|stdin")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		relayLazily(srcFd, p[1], stop)
		unix.Close(p[1])
	}()
	var once sync.Once
	return rd, func() {
		once.Do(func() { close(stop) })
		<-done
	}, nil
}

// lazyChunk is the most relayLazily copies in one round.
const lazyChunk = 256 << 10

// relayLazily tees src into w, a round at a time: a round's bytes are
// taken from src as the reader of w reads them, and the next round starts
// once it has read them all (tee copies from the start of src, where they
// stay until taken). On stop, what was read is taken and the rest left.
func relayLazily(src, w int, stop <-chan struct{}) {
	pending := 0 // bytes of the round still in src
	buf := make([]byte, 32<<10)
	// take reads n bytes the command read from src, which tee left
	// there. Another reader of src may have taken them meanwhile (a
	// process of the caller's beside moat): then src has less, and take
	// gives up rather than wait on it (poll, never a blocking read; src
	// may be in either mode, and is left as it is).
	take := func(n int) bool {
		for n > 0 {
			fds := []unix.PollFd{{Fd: int32(src), Events: unix.POLLIN}}
			if k, err := unix.Poll(fds, 100); err != nil && !errors.Is(err, unix.EINTR) || k == 0 && err == nil {
				return false
			} else if err != nil {
				continue
			}
			if fds[0].Revents&unix.POLLIN == 0 {
				return false
			}
			k, err := unix.Read(src, buf[:min(n, len(buf))])
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || k == 0 {
				return false
			}
			n -= k
		}
		return true
	}
	settle := func() {
		if pending > 0 {
			if unread, err := unix.IoctlGetInt(w, unix.TIOCINQ); err == nil && pending-unread > 0 {
				take(pending - unread)
			}
		}
	}
	wait := 20 * time.Microsecond
	for {
		select {
		case <-stop:
			settle()
			return
		default:
		}
		if pending > 0 {
			unread, err := unix.IoctlGetInt(w, unix.TIOCINQ)
			if err != nil {
				return
			}
			if read := pending - unread; read > 0 {
				if !take(read) {
					return
				}
				pending -= read
				wait = 20 * time.Microsecond
			}
			if pending > 0 {
				select {
				case <-stop:
					settle()
					return
				case <-time.After(wait):
				}
				wait = min(2*wait, 5*time.Millisecond)
				continue
			}
		}
		fds := []unix.PollFd{{Fd: int32(src), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 50)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if n == 0 {
			continue
		}
		k, err := unix.Tee(src, w, lazyChunk, unix.SPLICE_F_NONBLOCK)
		switch {
		case err == nil && k == 0:
			return // src ended: w is closed, the command sees the end
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			if fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0 && fds[0].Revents&unix.POLLIN == 0 {
				return
			}
			// src has data but w has no room: the command wrote into
			// its own pipe (it may reopen it, being its uid) and does
			// not read it. Wait for room, not in a loop.
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			continue
		case err != nil:
			return
		}
		pending = int(k)
	}
}
