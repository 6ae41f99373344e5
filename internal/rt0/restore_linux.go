package rt0

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"github.com/moatbox/moat/internal/rt0/entry"
)

// prSetTimerSlack is PR_SET_TIMERSLACK (linux/prctl.h). The package uses
// syscall, not golang.org/x/sys/unix, so that its test can build a program
// with it from the standard library alone.
const prSetTimerSlack = 29

// Restore sets the calling thread's timer slack back to the one the process
// started with, when the entry point changed it.
func Restore() {
	if entry.Slack != 0 {
		syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, uintptr(entry.Slack), 0)
	}
}

// RestoreThreads sets the timer slack back on the runtime's other threads
// too, as far as it can reach them (OnThreads). A thread takes its
// creator's slack, so the threads started before main have the raised
// one, and so do most of those they start later: an idle thread that has
// one takes a goroutine another has just readied only after up to that
// long, which a relay (the egress proxy, the TUN device's stack) pays on
// every handoff. sysmon, which never runs goroutines, keeps the raised
// one, and so does a thread it starts later (when it hands a processor
// on): this reaches the threads there are, not all there will be. Waking
// the threads costs a fraction of a millisecond of CPU, which is why it
// is not done at every start: only the first call does anything, and it
// returns when that is done.
func RestoreThreads() {
	if entry.Slack == 0 {
		return
	}
	restoreThreads.Do(func() { OnThreads(Restore) })
}

var restoreThreads sync.Once

// onThreadsRounds bounds OnThreads' rounds. Most starts need one; on a
// loaded machine the runtime hands out new threads more often while the
// idle ones wait, and four rounds once left one thread unreached.
const onThreadsRounds = 8

// OnThreads calls fn on each of the runtime's threads it can reach: it
// runs a goroutine locked to a thread per thread the process has, all at
// once, so that the runtime hands them its idle threads first (and makes
// new ones for the rest), and each calls fn. The runtime may start a new
// thread for one of them while an idle one waits, so it goes round again,
// up to onThreadsRounds times, while a thread that was there at the start
// and is still there has not been reached. A thread busy in a system call
// meanwhile is not reached.
func OnThreads(fn func()) {
	want := tasks()
	reached := map[int]bool{}
	for round := 0; round < onThreadsRounds && len(want) > 0; round++ {
		var mu sync.Mutex
		var ready, done sync.WaitGroup
		release := make(chan struct{})
		// One more goroutine each round: a thread the runtime makes for
		// one of them leaves one fewer for the threads that wait.
		for range len(want) + round {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				fn()
				mu.Lock()
				reached[syscall.Gettid()] = true
				mu.Unlock()
				ready.Done()
				<-release // hold the thread until every goroutine has one
			}()
		}
		ready.Wait()
		close(release)
		done.Wait()
		now := tasks()
		for tid := range want {
			if reached[tid] || !now[tid] {
				delete(want, tid) // done, or gone
			}
		}
	}
}

// tasks returns the ids of the process's threads.
func tasks() map[int]bool {
	f, err := os.Open("/proc/self/task")
	if err != nil {
		return nil
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	out := make(map[int]bool, len(names))
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil {
			out[tid] = true
		}
	}
	return out
}
