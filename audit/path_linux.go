package audit

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// oPath is Linux's O_PATH (the same on every architecture Go runs Linux
// on), which package syscall does not name.
const oPath = 0o10000000

// pathDir is a dirHandle of a descriptor opened with O_PATH: a directory
// the user may go through (x) but not read is opened as well as any.
type pathDir struct {
	f    *os.File
	path string
}

func openRoot() (dirHandle, error) {
	return openPathDir(-1, "/")
}

func openPathDir(parent int, name string) (*pathDir, error) {
	at := parent
	if parent < 0 {
		at = 0 // unused: name is absolute
	}
	fd, err := syscall.Openat(at, name, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "openat", Path: name, Err: err}
	}
	return &pathDir{f: os.NewFile(uintptr(fd), name), path: name}, nil
}

func (d *pathDir) fd() int { return int(d.f.Fd()) }

func (d *pathDir) sub(name string) (dirHandle, error) {
	s, err := openPathDir(d.fd(), name)
	if err != nil {
		return nil, err
	}
	s.path = filepath.Join(d.path, name)
	return s, nil
}

// Lstat opens name itself (O_PATH with O_NOFOLLOW opens a link, not what
// it leads to) and asks what it is.
func (d *pathDir) Lstat(name string) (fs.FileInfo, error) {
	fd, err := syscall.Openat(d.fd(), name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: filepath.Join(d.path, name), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, name))
	defer f.Close()
	return f.Stat()
}

func (d *pathDir) Stat(string) (fs.FileInfo, error) { return d.f.Stat() }

// Readlink reads the link name in the directory through /proc, which
// names the directory the descriptor holds, not a path to look up again.
func (d *pathDir) Readlink(name string) (string, error) {
	return os.Readlink("/proc/self/fd/" + strconv.Itoa(d.fd()) + "/" + name)
}

func (d *pathDir) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	fd, err := syscall.Openat(d.fd(), name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: filepath.Join(d.path, name), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.path, name)), nil
}

func (d *pathDir) sync() {
	if fd, err := syscall.Openat(d.fd(), ".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
		syscall.Fsync(fd)
		syscall.Close(fd)
	}
}

func (d *pathDir) Close() error { return d.f.Close() }
