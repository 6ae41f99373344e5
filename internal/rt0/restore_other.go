//go:build !linux

package rt0

// Restore does nothing: the entry point exists only on Linux.
func Restore() {}

// RestoreThreads does nothing: the entry point exists only on Linux.
func RestoreThreads() {}

// OnThreads calls fn on the calling goroutine's thread only.
func OnThreads(fn func()) { fn() }
