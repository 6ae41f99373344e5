//go:build !linux

package overlay

import (
	"io"
	"os"
)

// copyData copies in's content to out.
func copyData(out, in *os.File) error {
	_, err := io.Copy(out, in)
	return err
}
