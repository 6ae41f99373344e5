package native

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/pty"
)

// A terminal on the caller's stdin is never handed to the command. Passed
// as it is, the command could write to it past the output count and limit,
// and change its mode (echo off, raw) for after moat has exited. Instead the
// command gets a pseudo-terminal of its own, made on the host, as its stdin,
// as its stdout and stderr where those are terminals too, and as its
// controlling terminal (so /dev/tty inside is the pty, and Ctrl-C there
// interrupts the command's foreground process group). moat puts the real
// terminal in raw mode, relays keystrokes to the pty and the pty's output
// back, counting that output against the limit as it counts pipes, passes
// on window size changes, and restores the real terminal's mode when the
// run ends, however it ends.
type terminal struct {
	in     *os.File      // the caller's terminal: Stdio.Stdin
	fd     int           // its fd
	saved  *unix.Termios // its mode before the run, restored by close
	master *os.File      // moat's side of the pty, in Go's poller
	mfd    int           // its fd: master.Fd would make it blocking, and a blocked write unstoppable
	slave  *os.File      // the command's side; closed here once it has it
	out    io.Writer     // where the pty's output goes
	// outSlave and errSlave: the command's stdout and stderr are the pty
	// (the caller's are terminals), not moat's pipes.
	outSlave, errSlave bool

	wakeR, wakeW *os.File // closing wakeW stops the input relay
	relayDone    chan struct{}
	winch        chan os.Signal
	winchDone    chan struct{}
	closeOnce    sync.Once
}

// openTerminal makes a pty for a run whose Stdin is a terminal, and
// returns nil for any other Stdin. That test is a single ioctl, the only
// cost to a run without a terminal.
//
// A terminal whose foreground is another process group (moat was started
// in the background) is not taken: changing its mode would stop moat
// (SIGTTOU) and take it from the shell using it. background is then true,
// and the command's stdin must be /dev/null.
func openTerminal(stdio backend.Stdio) (t *terminal, background bool, err error) {
	in, ok := stdio.Stdin.(*os.File)
	if !ok || in == nil {
		return nil, false, nil
	}
	fd := int(in.Fd())
	saved, background, ok := terminalState(fd)
	if !ok {
		return nil, false, nil // not a terminal
	}
	if background {
		return nil, true, nil
	}
	t = &terminal{in: in, fd: fd, saved: saved}
	t.outSlave, t.errSlave = isTerminal(stdio.Stdout), isTerminal(stdio.Stderr)
	switch {
	case t.outSlave:
		t.out = stdio.Stdout
	case t.errSlave:
		t.out = stdio.Stderr
	default:
		// Both outputs are redirected: what the pty shows (the echo of
		// what is typed, writes to /dev/tty) goes to the terminal the
		// keystrokes come from, where the terminal itself would show it.
		t.out = in
	}

	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, fmt.Errorf("terminal: open /dev/ptmx: %w", err)
	}
	t.master, t.mfd = os.NewFile(uintptr(m), "ptmx"), m
	if err := t.makeSlave(); err != nil {
		t.master.Close()
		return nil, false, fmt.Errorf("terminal: %w", err)
	}
	return t, false, nil
}

// terminalState is openTerminal's test of its Stdin's fd: ok when it is a
// terminal (saved its mode), background when that terminal's foreground
// is another process group than moat's. ENOTTY from TIOCGPGRP: not
// moat's controlling terminal, which has no foreground for moat to be
// out of.
func terminalState(fd int) (saved *unix.Termios, background, ok bool) {
	saved, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, false, false
	}
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return saved, err == nil && fg != unix.Getpgrp(), true
}

// RelaysTerminal reports whether a run whose Stdin is stdin gets a pty
// that the backend relays, as openTerminal decides: stdin is a terminal
// of which moat has the foreground. It reads the fd through SyscallConn,
// leaving the file's mode (blocking or not) as it is.
func RelaysTerminal(stdin io.Reader) bool {
	f, ok := stdin.(*os.File)
	if !ok || f == nil {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	relays := false
	rc.Control(func(fd uintptr) {
		_, background, ok := terminalState(int(fd))
		relays = ok && !background
	})
	return relays
}

// makeSlave unlocks the pty and opens its slave through the master
// (TIOCGPTPEER), never by a path someone else could replace, with the
// caller's terminal's mode and size.
func (t *terminal) makeSlave() error {
	m := t.mfd
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		return fmt.Errorf("unlock pty: %w", err)
	}
	slave, err := pty.OpenPeer(m)
	if err != nil {
		return err
	}
	t.slave = slave
	if err := unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, t.saved); err != nil {
		t.slave.Close()
		return fmt.Errorf("set pty mode: %w", err)
	}
	t.resize()
	return nil
}

// isTerminal reports whether w is a terminal file.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// resize gives the pty the size of the caller's terminal.
func (t *terminal) resize() {
	if ws, err := unix.IoctlGetWinsize(t.fd, unix.TIOCGWINSZ); err == nil {
		unix.IoctlSetWinsize(t.mfd, unix.TIOCSWINSZ, ws)
	}
}

// start puts the caller's terminal in raw mode, so that every keystroke,
// Ctrl-C and Ctrl-Z among them, reaches the pty, whose own line
// discipline then treats them as the command's terminal; and starts
// relaying keystrokes and window sizes.
func (t *terminal) start() error {
	raw := *t.saved
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST // the pty has already turned \n into \r\n
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(t.fd, unix.TCSETS, &raw); err != nil {
		return fmt.Errorf("terminal: raw mode: %w", err)
	}
	r, w, err := pipe(false)
	if err != nil {
		t.restore()
		return fmt.Errorf("terminal: %w", err)
	}
	t.wakeR, t.wakeW = r, w
	t.relayDone = make(chan struct{})
	go t.relayInput()
	t.winch, t.winchDone = make(chan os.Signal, 1), make(chan struct{})
	signal.Notify(t.winch, syscall.SIGWINCH)
	go func() {
		defer close(t.winchDone)
		for range t.winch {
			t.resize()
		}
	}()
	return nil
}

// relayInput copies keystrokes to the pty until close. It reads the
// caller's terminal only once poll says there is something to read, so
// that the run's end (wakeR) never leaves a read waiting that would take
// the next keystroke from the caller's shell. The caller's fd is left
// blocking: its file description is shared with the shell.
func (t *terminal) relayInput() {
	defer close(t.relayDone)
	buf := make([]byte, 4096)
	fds := []unix.PollFd{{Fd: int32(t.fd), Events: unix.POLLIN}, {Fd: int32(t.wakeR.Fd()), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		if fds[1].Revents != 0 || fds[0].Revents&unix.POLLIN == 0 {
			return // the run is over, or the terminal hung up
		}
		n, err := unix.Read(t.fd, buf)
		if n <= 0 || err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
				continue
			}
			return
		}
		if _, err := t.master.Write(buf[:n]); err != nil {
			return
		}
	}
}

// restore puts the caller's terminal back in its mode from before the run.
func (t *terminal) restore() {
	unix.IoctlSetTermios(t.fd, unix.TCSETS, t.saved)
}

// close stops the relays, closes the pty and restores the caller's
// terminal. It is called once the pty's output has been relayed, and on
// every other way out of Run; calls after the first do nothing.
func (t *terminal) close() {
	t.closeOnce.Do(func() {
		t.slave.Close()
		if t.winch != nil {
			signal.Stop(t.winch)
			close(t.winch)
			<-t.winchDone // no resize of a closed fd
		}
		if t.wakeW != nil {
			t.wakeW.Close()
			t.master.Close() // ends a write to a full pty
			<-t.relayDone
			t.wakeR.Close()
		} else {
			t.master.Close()
		}
		t.restore()
	})
}
