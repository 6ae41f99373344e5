// Command probe is built by rt0's test with -ldflags=-E=_rt0_moat and
// without: it prints whether the entry point ran, the slack it saw, its
// first thread's slack in main, and that slack after Restore.
package main

import (
	"fmt"
	"runtime"
	"syscall"

	"github.com/moatbox/moat/internal/rt0"
)

func slack() uintptr {
	r, _, _ := syscall.RawSyscall(syscall.SYS_PRCTL, 30, 0, 0) // PR_GET_TIMERSLACK
	return r
}

func main() {
	runtime.LockOSThread() // main runs on the first thread; keep it there
	before := slack()
	rt0.Restore()
	fmt.Println(rt0.Linked(), rt0.Slack(), before, slack())
}
