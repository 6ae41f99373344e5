package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrLink is returned (wrapped, with [ErrNotAFile]) by [Open] and
// [OpenFile] for a path with a symbolic link on it that moat does not
// follow.
var ErrLink = errors.New("symbolic link on the path")

// LinkError names the component of a path that is a symbolic link moat
// does not follow.
type LinkError struct {
	Path      string // the path as given
	Component string // the link: the path up to and including it
	Owner     int    // the link's owner (uid)
}

func (e *LinkError) Error() string {
	return fmt.Sprintf("%s: %s is a symbolic link (owned by uid %d), which moat does not write through (a command run where it lies could have made it); name the file by its real path", e.Path, e.Component, e.Owner)
}

func (e *LinkError) Unwrap() []error { return []error{ErrLink, ErrNotAFile} }

// maxLinks bounds the links followed on one path, as the kernel does.
const maxLinks = 40

// OpenFile opens path as os.OpenFile does (flag and perm), without
// following a symbolic link anywhere on it that someone other than root
// could have made: each directory is opened from the one before it
// (os.Root) and each component looked at before it is gone through, so
// that a link swapped in meanwhile is caught too.
//
// A file moat writes a record to (an audit stream, a report) may lie
// where a sandboxed command writes, and the command runs as the user: a
// link it made is the user's own, and a link the user made is no
// different, so only root's links are followed, only where nobody else
// could have put them (a directory only root writes, or a sticky one),
// and only for a user other than root: the layout of the system
// (/var/run, /bin, /tmp on macOS). For root, whose sandboxes' links are
// root's too, no link is followed. Any other link on the path is refused
// with a *LinkError naming it, and the file is then best named by its
// real path.
//
// A relative path is taken from the working directory, by its real path.
// A directory the user may go through but not read is gone through
// (on Linux, where a directory can be opened for that alone).
func OpenFile(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, dir, _, err := openFile(path, flag, perm)
	if err == nil {
		dir.Close()
	}
	return f, err
}

// dirHandle is a directory opened on the way: os.Root, or on Linux a
// descriptor opened with O_PATH, which needs no permission to read it.
type dirHandle interface {
	Lstat(name string) (fs.FileInfo, error)
	Stat(name string) (fs.FileInfo, error) // of ".", the directory itself
	Readlink(name string) (string, error)
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	// sub opens the directory name in it.
	sub(name string) (dirHandle, error)
	// sync flushes the directory's entries, as far as it can.
	sync()
	Close() error
}

// openFile is OpenFile that returns the file's directory, and its name
// there, too; the caller closes the directory.
func openFile(path string, flag int, perm fs.FileMode) (*os.File, dirHandle, string, error) {
	abs := path
	if !filepath.IsAbs(abs) {
		wd, err := syscall.Getwd() // the kernel's: no link of $PWD's
		if err != nil {
			return nil, nil, "", fmt.Errorf("%s: the working directory: %w", path, err)
		}
		abs = filepath.Join(wd, abs)
	}
	abs = filepath.Clean(abs)
	if abs == "/" {
		return nil, nil, "", fmt.Errorf("%s is a directory: %w", path, ErrNotAFile)
	}
	for links := 0; ; links++ {
		dir, last, next, err := walk(path, abs)
		if err != nil {
			return nil, nil, "", err
		}
		if next != "" {
			if links >= maxLinks {
				return nil, nil, "", fmt.Errorf("%s: too many links: %w", path, syscall.ELOOP)
			}
			abs = next
			continue
		}
		f, err := dir.OpenFile(last, flag|syscall.O_NOFOLLOW, perm)
		if errors.Is(err, syscall.ELOOP) {
			// Made between the look and the open.
			err = &LinkError{Path: path, Component: abs, Owner: -1}
		}
		if err != nil {
			dir.Close()
			return nil, nil, "", err
		}
		return f, dir, last, nil
	}
}

// resolve is where a link in dir to target leads.
func resolve(dir, target string) string {
	if filepath.IsAbs(target) {
		return filepath.Clean(target)
	}
	return filepath.Join(dir, target)
}

// walk opens the directory of abs, a clean absolute path other than
// "/", going through each of its components, and returns it and the last
// component; or, for a component that is a root link (linkAllowed), the
// path it leads to, to walk again.
func walk(path, abs string) (dir dirHandle, last, next string, err error) {
	dir, err = openRoot()
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: %w", path, err)
	}
	parts := strings.Split(abs[1:], "/")
	done := "/"
	for i, c := range parts {
		fi, err := dir.Lstat(c)
		if errors.Is(err, fs.ErrNotExist) && i == len(parts)-1 {
			return dir, c, "", nil // to be made
		}
		if err != nil {
			dir.Close()
			return nil, "", "", fmt.Errorf("%s: %w", path, err)
		}
		here := filepath.Join(done, c)
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := linkAllowed(path, dir, done, c, fi)
			dir.Close()
			if err != nil {
				return nil, "", "", err
			}
			return nil, "", filepath.Join(append([]string{resolve(done, target)}, parts[i+1:]...)...), nil
		}
		if i == len(parts)-1 {
			return dir, c, "", nil
		}
		if !fi.IsDir() {
			dir.Close()
			return nil, "", "", fmt.Errorf("%s: %s is not a directory: %w", path, here, syscall.ENOTDIR)
		}
		sub, err := dir.sub(c)
		if err == nil {
			// The directory opened must be the one looked at, not one
			// swapped in since (os.Root would follow a link that
			// stays beneath it).
			if st, serr := sub.Stat("."); serr != nil || !os.SameFile(fi, st) {
				sub.Close()
				err = fmt.Errorf("%s changed while it was opened", here)
			}
		}
		dir.Close()
		if err != nil {
			return nil, "", "", fmt.Errorf("%s: %w", path, err)
		}
		dir, done = sub, here
	}
	panic("unreachable: abs is not /")
}

// linkAllowed returns the target of the link name in dir (at dirPath; fi
// its Lstat), if it is
// root's in a directory nobody else could have put it in; a *LinkError
// otherwise.
func linkAllowed(path string, dir dirHandle, dirPath, name string, fi fs.FileInfo) (string, error) {
	uid := -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid = int(st.Uid)
	}
	lerr := &LinkError{Path: path, Component: filepath.Join(dirPath, name), Owner: uid}
	if uid != 0 || os.Geteuid() == 0 {
		return "", lerr
	}
	di, err := dir.Stat(".")
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	st, ok := di.Sys().(*syscall.Stat_t)
	if !ok || st.Uid != 0 || (di.Mode().Perm()&0o022 != 0 && di.Mode()&fs.ModeSticky == 0) {
		return "", lerr
	}
	target, err := dir.Readlink(name)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return target, nil
}
