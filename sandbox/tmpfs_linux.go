package sandbox

import "golang.org/x/sys/unix"

// onBoundedTmpfs says whether path is on a tmpfs whose size is at most
// limit bytes, which no write can then outgrow.
func onBoundedTmpfs(path string, limit int64) bool {
	var st unix.Statfs_t
	if limit <= 0 || path == "" || unix.Statfs(path, &st) != nil {
		return false
	}
	return st.Type == unix.TMPFS_MAGIC && st.Blocks > 0 && int64(st.Blocks)*st.Bsize <= limit
}
