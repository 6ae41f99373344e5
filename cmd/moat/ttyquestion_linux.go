package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
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
// for stdin and relay it (a terminal of which moat has the foreground, as
// backend/native's openTerminal decides): the command's output then goes
// through the pty, and no question is asked while it runs.
func relaysTerminal(stdin io.Reader) bool {
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
		if _, err := unix.IoctlGetTermios(int(fd), unix.TCGETS); err != nil {
			return
		}
		fg, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP)
		relays = err != nil || fg == unix.Getpgrp()
	})
	return relays
}
