package termsafe

import (
	"os"
	"syscall"
	"unsafe"
)

// isTerminal asks for the file's terminal attributes, with the standard
// library alone: the client package links nothing else (see its doc).
func isTerminal(f *os.File) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
