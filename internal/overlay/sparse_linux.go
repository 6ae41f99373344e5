package overlay

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// copyData copies in's content to out, the data between holes only
// (lseek SEEK_DATA/SEEK_HOLE), then sets out's size, so that the holes
// stay holes. A file system that does not tell (EINVAL) is copied whole.
func copyData(out, in *os.File) error {
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	ifd := int(in.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(ifd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if errors.Is(err, unix.EINVAL) && off == 0 {
			_, err = io.Copy(out, in)
			return err
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(ifd, data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if _, err := in.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := out.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(out, in, hole-data); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		off = hole
	}
	// What the walk found is copied; the size is the one the file had
	// when the copy began, as for a file copied whole.
	return out.Truncate(size)
}
