package native

import (
	"runtime"
	"sync"
)

// The thread that starts an init. The kernel sends init its parent-death
// signal (SIGKILL: the run ends with moat) when the thread that cloned it
// ends, not when moat's process does; and the Go runtime ends a thread
// when a goroutine exits while locked to it (runtime.LockOSThread without
// UnlockOSThread), which a program embedding this package may do. Unless
// the caller promises otherwise (Backend.NoLockedExits, set by the CLI,
// whose own code never does), inits are started on one thread kept for
// that: a goroutine locked to it for the life of the process, made at the
// first run (the first LockOSThread of a process also starts the
// runtime's template thread: two threads, once).
var startThread struct {
	once sync.Once
	work chan func()
}

// onStartThread runs f on the start thread and waits for it.
func onStartThread(f func()) {
	startThread.once.Do(func() {
		startThread.work = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays
			for f := range startThread.work {
				f()
			}
		}()
	})
	done := make(chan struct{})
	startThread.work <- func() {
		defer close(done)
		f()
	}
	<-done
}

// onInitParent runs f, which starts an init (or a process that must die
// with moat), on a thread that outlives it: the start thread, unless the
// caller promised NoLockedExits, when any thread does.
func (b *Backend) onInitParent(f func()) {
	if b.NoLockedExits {
		f()
		return
	}
	onStartThread(f)
}
