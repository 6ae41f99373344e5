package native

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// The caller's stdin reaches the command as it is only when it is an
// anonymous pipe. Any other open file is an inode of the host, and its
// descriptor carries more than its contents: the command could change
// the file's mode, times and extended attributes (fchmod, or chmod of
// /proc/self/fd/0, which Landlock does not cover), reopen it through
// /proc/self/fd/0 with more access than it was given, and, given a
// directory, list it and open files and parents ("..") from it, outside
// every mount of the sandbox. Such a stdin is read by moat and written
// into a pipe instead, as any io.Reader is: the command then cannot
// seek it, which is what a pipe into `moat run` gives it too.
//
// A terminal never gets here as it is: Run gives the command a pty of
// its own (see terminal), and a session reads it through a pipe too.
func passStdin(f *os.File) bool {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return false
	}
	// A named FIFO is a file of a host filesystem, with a mode of its own.
	var fs unix.Statfs_t
	return unix.Fstatfs(int(f.Fd()), &fs) == nil && fs.Type == unix.PIPEFS_MAGIC
}

// contentsOf is a stdin that passStdin refuses, as a reader: its
// contents, without the file.
func contentsOf(f *os.File) io.Reader {
	return struct{ io.Reader }{f}
}
