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
