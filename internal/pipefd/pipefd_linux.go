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

// Passable reports whether a command running as the host uid uid may
// hold f as its stdin as it is: an anonymous pipe it cannot reopen
// (PassablePipe), or the null device (character device 1:3), which is
// the same inode for everyone, holds nothing and is root's, so that its
// holder can change nothing of it. Passing /dev/null as it is spares the
// commonest non-interactive stdin a copy through a pipe. (The gvisor
// backend passes pipes only: runsc changes the owner of a file it is
// given as stdio.)
func Passable(f *os.File, uid int) bool {
	if PassablePipe(f, uid) {
		return true
	}
	var st unix.Stat_t
	return unix.Fstat(int(f.Fd()), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR &&
		st.Rdev == unix.Mkdev(1, 3) && st.Uid == 0
}

// PassablePipe reports whether f is an anonymous pipe that a command
// running as the host uid uid cannot reopen through /proc/self/fd: one
// no other user may open (the kernel makes them 0600) and that another
// uid made. An ordinary user's command runs as that user, so the user's
// own pipes are not passable. A uid of -1 stands for a command that runs
// as no uid that makes pipes the caller holds (root's commands).
func PassablePipe(f *os.File, uid int) bool {
	if !Anonymous(f) {
		return false
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&0o077 != 0 {
		return false
	}
	return uid < 0 || st.Uid != uint32(uid)
}
