// Command threads is built by rt0's test with -ldflags=-E=_rt0_moat: it
// prints how many of the runtime's idle threads have the raised timer
// slack before RestoreThreads and after it.
package main

import (
	"fmt"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/moatbox/moat/internal/rt0"
)

// init blocks two goroutines in a system call, so that the runtime starts
// threads for the others before main, from threads with the raised slack.
func init() {
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := syscall.Timespec{Nsec: int64(20 * time.Millisecond)}
			syscall.Syscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		}()
	}
	wg.Wait()
}

// raised counts the threads rt0.OnThreads reaches whose slack is the
// raised one.
func raised() int {
	var mu sync.Mutex
	n := 0
	rt0.OnThreads(func() {
		r, _, _ := syscall.RawSyscall(syscall.SYS_PRCTL, 30, 0, 0) // PR_GET_TIMERSLACK
		if r == 500000 {
			mu.Lock()
			n++
			mu.Unlock()
		}
	})
	return n
}

func main() {
	rt0.Restore()
	before := raised()
	rt0.RestoreThreads()
	fmt.Println(rt0.Linked(), before, raised())
}
