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

// Passable reports whether a command may hold f as its stdin as it is:
// an anonymous pipe, or the null device (character device 1:3), which is
// the same inode for everyone, holds nothing and is root's, so that its
// holder can change nothing of it. Passing /dev/null as it is spares the
// commonest non-interactive stdin a copy through a pipe. (The gvisor
// backend passes pipes only: runsc changes the owner of a file it is
// given as stdio.)
func Passable(f *os.File) bool {
	if Anonymous(f) {
		return true
	}
	var st unix.Stat_t
	return unix.Fstat(int(f.Fd()), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR &&
		st.Rdev == unix.Mkdev(1, 3) && st.Uid == 0
}
