// Command threads is built by rt0's test with -ldflags=-E=_rt0_moat: it
// prints how many of the runtime's idle threads have the raised timer
// slack before RestoreThreads, and how many of those still have it after.
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

// raised returns the threads rt0.OnThreads reaches whose slack is the
// raised one. Reaching them may make new threads (each goroutine it runs
// keeps its thread), and a thread sysmon makes takes sysmon's slack,
// which stays raised: only the threads that were there before
// RestoreThreads are its to put back.
func raised() map[int]bool {
	var mu sync.Mutex
	tids := map[int]bool{}
	rt0.OnThreads(func() {
		r, _, _ := syscall.RawSyscall(syscall.SYS_PRCTL, 30, 0, 0) // PR_GET_TIMERSLACK
		if r == 500000 {
			mu.Lock()
			tids[syscall.Gettid()] = true
			mu.Unlock()
		}
	})
	return tids
}

func main() {
	rt0.Restore()
	before := raised()
	rt0.RestoreThreads()
	still := 0
	for tid := range raised() {
		if before[tid] {
			still++
		}
	}
	fmt.Println(rt0.Linked(), len(before), still)
}
