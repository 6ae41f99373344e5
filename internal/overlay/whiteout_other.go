//go:build !linux

package overlay

import "io/fs"

// IsWhiteout is false: overlay upper layers exist only on Linux.
func IsWhiteout(fs.FileInfo) bool { return false }
