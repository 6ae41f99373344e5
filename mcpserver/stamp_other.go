//go:build !linux

package mcpserver

import "io/fs"

// changeStamp: see stamp_linux.go; elsewhere the modification time.
func changeStamp(fi fs.FileInfo) (sec, nsec, size int64) {
	t := fi.ModTime()
	return t.Unix(), int64(t.Nanosecond()), fi.Size()
}
