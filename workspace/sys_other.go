//go:build !linux

package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// Overlay upper layers exist only on Linux; elsewhere every operation that
// needs the kernel's view of a file refuses.

type stamp struct {
	Sec  int64 `json:"sec"`
	Nsec int64 `json:"nsec"`
}

func (s stamp) before(t stamp) bool {
	return s.Sec < t.Sec || (s.Sec == t.Sec && s.Nsec < t.Nsec)
}

var errNotLinux = fmt.Errorf("overlay workspaces: %w", errors.ErrUnsupported)

func ctimeOf(fs.FileInfo) stamp                               { return stamp{} }
func coarseNow() stamp                                        { return stamp{} }
func isOpaque(string) (bool, error)                           { return false, errNotLinux }
func checkOverlayFeatures(string, fs.FileInfo) error          { return errNotLinux }
func flock(*os.File) error                                    { return errNotLinux }
func blocksOf(fi fs.FileInfo) (int64, uint64, uint64, uint64) { return fi.Size(), 0, 0, 1 }
func renameNoReplace(string, string) error                    { return errors.ErrUnsupported }
func xattr(string, string) (string, error)                    { return "", errNotLinux }
func hasDefaultACL(string) bool                               { return false }
func removeDefaultACL(string) error                           { return errNotLinux }
func openDefaultACL(string) bool                              { return false }
func openAccessACL(string) bool                               { return false }
func hasAnyACL(string) bool                                   { return false }
func removeAccessACL(string) error                            { return errNotLinux }

type pinnedDir struct{ path string }

func pinDir(p string) (pinnedDir, error)    { return pinnedDir{p}, nil }
func (d pinnedDir) join(name string) string { return d.path + "/" + name }
func (d pinnedDir) self() string            { return d.path }
func (d pinnedDir) Close()                  {}

func openBeneath(root pinnedDir, rel string) (pinnedDir, error) {
	return pinnedDir{root.path + "/" + rel}, nil
}

func chmodNoFollow(p string, mode fs.FileMode) error { return os.Chmod(p, mode) }

func renameWritable(_ pinnedDir, _, _ string, err error) error { return err }

func lstatBeneath(root pinnedDir, rel string) (fs.FileInfo, error) {
	return os.Lstat(root.path + "/" + rel)
}

// readNoFollow is the Linux one's, with a look and an open: elsewhere
// no git directory is judged for an overlay's change set.
func readNoFollow(p string, n int) (target string, isLink bool, b []byte, err error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return "", false, nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(p)
		return t, err == nil, nil, err
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", false, nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", false, nil, fmt.Errorf("%s: not a regular file", p)
	}
	b = make([]byte, n)
	m, err := io.ReadFull(f, b)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", false, nil, err
	}
	return "", false, b[:m], nil
}

// atimeOf is fi's modification time: its access time is not read here.
func atimeOf(fi fs.FileInfo) time.Time { return fi.ModTime() }

// openReview is the Linux one's with a look and an open: elsewhere no
// change set is made.
func openReview(p string, dir bool) (*os.File, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() && !(dir && fi.IsDir()) {
		return nil, &fs.PathError{Op: "open", Path: p, Err: errChangedUnderReview}
	}
	return os.Open(p)
}

func hasACL(string) bool { return false }

func removeXattr(string, string) error { return errNotLinux }
