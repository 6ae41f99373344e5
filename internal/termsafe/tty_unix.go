//go:build linux || darwin

package termsafe

import (
	"os"
	"syscall"
	"unsafe"
)

// isTerminal asks for the file's terminal attributes, with the standard
// library alone: the client and audit packages link nothing else.
func isTerminal(f *os.File) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), getTermios, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}

// terminalID is the terminal f's device number, or 0 for a device that
// stands for another terminal (/dev/tty, the console) or one not told.
func terminalID(f *os.File) uint64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	rdev := uint64(st.Rdev)
	if aliasDevice(rdev) {
		return 0
	}
	return rdev
}
