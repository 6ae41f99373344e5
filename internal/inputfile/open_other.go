//go:build !linux

package inputfile

import (
	"os"
	"syscall"
)

// open opens path for Read, without blocking on a named pipe.
func open(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
