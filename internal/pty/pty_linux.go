package pty

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Open makes a pseudo-terminal of rows by cols (the kernel's default
// size when either is 0): the master, non-blocking so that it waits in
// Go's poller, and its peer, both close-on-exec.
func Open(rows, cols uint16) (master, peer *os.File, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("terminal: open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(m)
		return nil, nil, fmt.Errorf("terminal: unlock pty: %w", err)
	}
	if rows > 0 && cols > 0 {
		unix.IoctlSetWinsize(m, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	}
	p, err := OpenPeer(m)
	if err != nil {
		unix.Close(m)
		return nil, nil, err
	}
	return os.NewFile(uintptr(m), "ptmx"), p, nil
}

// OpenPeer opens the peer of the unlocked master m through m itself.
func OpenPeer(m int) (*os.File, error) {
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return nil, fmt.Errorf("terminal: open pty: %w", errno)
	}
	return os.NewFile(s, "pty"), nil
}
