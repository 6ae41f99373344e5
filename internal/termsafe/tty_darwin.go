package termsafe

import (
	"os"
	"syscall"
	"unsafe"
)

// isTerminal serves a client on macOS of a daemon elsewhere, with the
// standard library alone (see tty_linux.go).
func isTerminal(f *os.File) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCGETA, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
