package mcpserver

import (
	"io/fs"
	"syscall"
)

// changeStamp is what tells a file's content changed when the review
// does not read it (one over the review's read bound): its inode change
// time, which every write moves and no command can set, and its size.
func changeStamp(fi fs.FileInfo) (sec, nsec, size int64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Sec, st.Ctim.Nsec, fi.Size()
	}
	return 0, 0, fi.Size()
}
