package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend/native"
)

// flushInput discards what the terminal has received and nobody has read.
// The fd is reached through SyscallConn: Fd would make the terminal's
// reads blocking, out of reach of Close.
func flushInput(tty *os.File) {
	if rc, err := tty.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.IoctlSetInt(int(fd), unix.TCFLSH, unix.TCIFLUSH) })
	}
}

// relaysTerminal says whether the backend will give the command a pty
// for stdin and relay it: the command's output then goes through the
// pty, and no question is asked while it runs. backend/native decides,
// by the same test.
func relaysTerminal(stdin io.Reader) bool { return native.RelaysTerminal(stdin) }

// isTerminal says whether w is a terminal file (through SyscallConn, as
// flushInput, leaving its mode as it is).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	tty := false
	rc.Control(func(fd uintptr) {
		_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
		tty = err == nil
	})
	return tty
}
