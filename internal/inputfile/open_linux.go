package inputfile

import (
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// oPath is O_PATH, which package syscall does not name; the value is the
// one of every architecture moat builds for (the package stays free of
// golang.org/x/sys, as policy, which reads through it, must).
const oPath = 0o10000000

// open opens path for Read without ever opening what is not a regular
// file: a device acts when opened (a watchdog starts, a tape rewinds),
// and the path may come through a link someone else planted (a
// workspace's .git/config). It is looked up first without being opened
// (O_PATH); a regular file is then opened for reading through that
// descriptor, so the same file; anything else is returned as looked up,
// for Read to refuse by its type. With noFollow, a link at path is
// looked up as itself, and so refused.
func open(path string, noFollow bool) (*os.File, error) {
	flags := oPath | syscall.O_CLOEXEC
	if noFollow {
		flags |= syscall.O_NOFOLLOW
	}
	fd, err := syscall.Open(path, flags, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return os.NewFile(uintptr(fd), path), nil
	}
	defer syscall.Close(fd)
	rfd, err := syscall.Open("/proc/self/fd/"+strconv.Itoa(fd), syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err == nil {
		return os.NewFile(uintptr(rfd), path), nil
	}
	if _, serr := os.Stat("/proc/self/fd"); serr == nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	// Without /proc: by path again, and only the file looked up.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|(flags&syscall.O_NOFOLLOW), 0)
	if err != nil {
		return nil, err
	}
	var now syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &now); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("replaced while opened")}
	}
	return f, nil
}
