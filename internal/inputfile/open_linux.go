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
	if kfs := kernelFS(fd); kfs != "" {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("a file of the kernel's %s, which no input is read from: a read there can wait for ever (/proc/kmsg) or take what it reads from others", kfs)}
	}
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

// kernelFS names the kernel's own file system fd is on (procfs, sysfs and
// the like, whose regular files are the kernel's interfaces), or "".
func kernelFS(fd int) string {
	var sfs syscall.Statfs_t
	if err := syscall.Fstatfs(fd, &sfs); err != nil {
		return ""
	}
	switch uint32(sfs.Type) {
	case 0x9fa0:
		return "procfs"
	case 0x62656572:
		return "sysfs"
	case 0x64626720:
		return "debugfs"
	case 0x74726163:
		return "tracefs"
	case 0x73636673:
		return "securityfs"
	}
	return ""
}
