//go:build unix

package httpapi

import (
	"os"
	"syscall"
)

// fileOwner is the uid that owns the file fi describes.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}
