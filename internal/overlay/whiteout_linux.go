package overlay

import (
	"io/fs"
	"syscall"
)

// IsWhiteout reports whether fi (from Lstat) is an overlay whiteout: a
// character device numbered 0/0, which hides the lower layers' file of
// that name.
func IsWhiteout(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}
