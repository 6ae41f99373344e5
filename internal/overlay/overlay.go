// Package overlay holds the few file operations both sides of an overlay
// share: the workspace package, which reads a change set's upper layer
// from the host and applies it, and the native backend's init, which
// merges a run's upper layer into the persistent one inside the sandbox.
// One copy of each keeps the two sides from drifting apart. It imports
// nothing of moat's, so either may import it.
package overlay

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// MergeXattr is set on the root of a change set's upper layer while the
// native backend's init merges a run's upper layer into it (under a disk
// limit): set, the layer may hold part of that run's changes over part of
// the earlier ones, and the workspace package refuses to read it as
// changes. It is in overlayfs's private namespace (user.overlay.), which
// a command cannot set through the overlay, so it cannot be forged from
// inside a sandbox; overlayfs ignores a private attribute it does not
// know. (The change set's own directory is not writable from init.)
const MergeXattr = "user.overlay.moat-merging"

// MergePending is MergeXattr's value from the start of such a run until
// its merge begins: the run's changes are on its tmpfs only, and a run
// (or session) killed meanwhile has lost them.
const MergePending = "pending"

// ErrNotRegular is returned by OpenRegular and CopyFile for a path that
// is not a regular file when opened: a symlink, directory, FIFO, socket
// or device.
var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens the regular file at path for reading, and returns it
// with its status taken from the open file. A symlink at path is not
// followed and a FIFO or device not waited on (ErrNotRegular): the
// callers copy files that a sandboxed command may swap between their
// look at a name and its open, and as root a followed link could lead to
// any file of the host, a FIFO hold the copy forever.
func OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, &fs.PathError{Op: "open", Path: path, Err: ErrNotRegular}
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	return f, fi, nil
}

// CopyFile writes src's content to dst, a new file (it must not exist),
// with permissions perm, and fsyncs it when durable. src must be a
// regular file (see OpenRegular). On an error dst may be left behind,
// partly written; callers copy to a temporary name and rename.
func CopyFile(src, dst string, perm fs.FileMode, durable bool) error {
	in, _, err := OpenRegular(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return CopyFrom(in, dst, perm, durable)
}

// CopyFrom is CopyFile from an open file. A sparse file stays sparse
// where the system says where its data lies: its holes are not written,
// so a file a command made of a few blocks and a huge size costs the
// copy's file system those few blocks, not its size.
func CopyFrom(in *os.File, dst string, perm fs.FileMode, durable bool) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := copyData(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(perm); err != nil {
		out.Close()
		return err
	}
	if durable {
		if err := out.Sync(); err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}
