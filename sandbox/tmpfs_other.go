//go:build !linux

package sandbox

// onBoundedTmpfs is false where moat does not run sandboxes.
func onBoundedTmpfs(string, int64) bool { return false }
