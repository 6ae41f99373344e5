package pipefd

import (
	"os"

	"golang.org/x/sys/unix"
)

// Anonymous reports whether f is an anonymous pipe (pipe(2)): a FIFO on
// the kernel's pipe filesystem. A named FIFO is a file of a host
// filesystem, with a mode and an owner of its own, and is not one.
func Anonymous(f *os.File) bool {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return false
	}
	var fs unix.Statfs_t
	return unix.Fstatfs(int(f.Fd()), &fs) == nil && fs.Type == unix.PIPEFS_MAGIC
}
