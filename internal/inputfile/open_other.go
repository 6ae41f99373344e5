//go:build !linux

package inputfile

import (
	"os"
	"syscall"
)

// open opens path for Read, without blocking on a named pipe, nor, with
// noFollow, following a link at path.
func open(path string, noFollow bool) (*os.File, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK
	if noFollow {
		flags |= syscall.O_NOFOLLOW
	}
	return os.OpenFile(path, flags, 0)
}
