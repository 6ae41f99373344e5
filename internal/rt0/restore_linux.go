package rt0

import "syscall"

// prSetTimerSlack is PR_SET_TIMERSLACK (linux/prctl.h). The package uses
// syscall, not golang.org/x/sys/unix, so that its test can build a program
// with it from the standard library alone.
const prSetTimerSlack = 29

// Restore sets the calling thread's timer slack back to the one the process
// started with, when the entry point changed it.
func Restore() {
	if entrySlack != 0 {
		syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, uintptr(entrySlack), 0)
	}
}
