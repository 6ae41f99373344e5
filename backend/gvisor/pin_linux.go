package gvisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A protected path's or a pin's source is staged, not named: pin opens it
// one component at a time, refusing a link anywhere on the way (the Spec
// names resolved paths, so a link there appeared since, and the native
// backend refuses it too), clones the mount tree at that file
// (open_tree), and names a mount point in the container's directory,
// which only root can enter. The gate (cgroup_linux.go) moves each clone
// onto its mount point in a mount namespace of its own before it becomes
// runsc, so runsc's gofer binds the very files pin opened, from a path no
// one else can change, and the clones go with the namespace when the
// sandbox ends: nothing is mounted on the host.

// pin stages src for ociMounts (see above).
func (c *container) pin(src string) (string, error) {
	fd, err := openNoLinks(src)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", &fs.PathError{Op: "stat", Path: src, Err: err}
	}
	if k := st.Mode & unix.S_IFMT; k != unix.S_IFDIR && k != unix.S_IFREG {
		// runsc's gofer opens what it binds, and a FIFO's open waits
		// for a writer for ever (a sandbox could leave one at .envrc
		// and hang every later run); a socket or a device it cannot
		// open at all.
		return "", fmt.Errorf("%s is %s: the gvisor backend binds only files and directories (remove it, or use --isolation native)", src, specialKind(k))
	}
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return "", fmt.Errorf("clone the mount at %s: %w", src, err)
	}
	f := os.NewFile(uintptr(tree), src)
	if c.stage == "" {
		c.stage = filepath.Join(c.dir, "stage")
		if err := os.Mkdir(c.stage, 0o700); err != nil {
			f.Close()
			return "", err
		}
	}
	point := filepath.Join(c.stage, strconv.Itoa(len(c.trees)))
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.Mkdir(point, 0o700)
	} else {
		err = os.WriteFile(point, nil, 0o600)
	}
	if err != nil {
		f.Close()
		return "", err
	}
	c.trees = append(c.trees, f)
	return point, nil
}

// errLink refuses a link on the way to a staged source.
var errLink = errors.New("is a symbolic link (it changed while the sandbox was set up)")

// openNoLinks opens the absolute path p with O_PATH, following no link
// in any of its components.
func openNoLinks(p string) (int, error) {
	if !filepath.IsAbs(p) {
		return -1, fmt.Errorf("%s: not an absolute path", p)
	}
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	walked := "/"
	for _, name := range strings.Split(filepath.Clean(p), "/") {
		if name == "" {
			continue
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		walked = filepath.Join(walked, name)
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: walked, Err: err}
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, &fs.PathError{Op: "stat", Path: walked, Err: err}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(fd)
			if walked == filepath.Clean(p) {
				return -1, errLink
			}
			return -1, fmt.Errorf("%s on the way to it %w", walked, errLink)
		}
	}
	return fd, nil
}

// stageTrees moves the clones the gate was given (fds 5 and up, n of
// them) onto their mount points in dir, in a mount namespace of the
// calling thread's own, which the caller then execs in: nothing of it
// reaches the host's.
func stageTrees(n int, dir string) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mount namespace private: %w", err)
	}
	for i := 0; i < n; i++ {
		fd := 5 + i
		if err := unix.MoveMount(fd, "", unix.AT_FDCWD, filepath.Join(dir, strconv.Itoa(i)), unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("mount staged source %d: %w", i, err)
		}
		unix.Close(fd)
	}
	return nil
}

// specialKind names a file type that is neither a file nor a directory.
func specialKind(k uint32) string {
	switch k {
	case unix.S_IFIFO:
		return "a named pipe"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	}
	return "not a file or a directory"
}
