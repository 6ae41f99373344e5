package main

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// quitDefault gives SIGQUIT its default action (moat ends, as it would
// by SIGTERM's, with no dump of its goroutines, which is what the Go
// runtime's handler prints for a signal no one asked for) and returns a
// func that puts the runtime's handler back. The caller asks for the
// signal (signal.Notify) before calling it: from then on SIGQUIT is
// delivered to the caller, and before it has its default action, never
// the runtime's dump. Asking for a signal is what costs the Go runtime
// its signal threads, which a run that ends quickly never needs; the
// default action costs one system call.
func quitDefault() (restore func()) {
	var dfl, old [4]uint64 // struct sigaction; a zero handler is SIG_DFL
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGQUIT),
		uintptr(unsafe.Pointer(&dfl)), uintptr(unsafe.Pointer(&old)), 8, 0, 0)
	if errno != 0 {
		return func() {}
	}
	return func() {
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGQUIT),
			uintptr(unsafe.Pointer(&old)), 0, 8, 0, 0)
	}
}
