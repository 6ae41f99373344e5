package inputfile

import (
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// open opens path for Read without ever opening what is not a regular
// file: a device acts when opened (a watchdog starts, a tape rewinds),
// and the path may come through a link someone else planted (a
// workspace's .git/config). It is looked up first without being opened
// (O_PATH); a regular file is then opened for reading through that
// descriptor, so the same file; anything else is returned as looked up,
// for Read to refuse by its type.
func open(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return os.NewFile(uintptr(fd), path), nil
	}
	defer unix.Close(fd)
	rfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == nil {
		return os.NewFile(uintptr(rfd), path), nil
	}
	if _, serr := os.Stat("/proc/self/fd"); serr == nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	// Without /proc: by path again, and only the file looked up.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	var now unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &now); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("replaced while opened")}
	}
	return f, nil
}
