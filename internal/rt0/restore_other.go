//go:build !linux

package rt0

// Restore does nothing: the entry point exists only on Linux.
func Restore() {}
