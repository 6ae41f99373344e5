// Package overlay holds the few file operations both sides of an overlay
// share: the workspace package, which reads a change set's upper layer
// from the host and applies it, and the native backend's init, which
// merges a run's upper layer into the persistent one inside the sandbox.
// One copy of each keeps the two sides from drifting apart. It imports
// nothing of moat's, so either may import it.
package overlay

import (
	"io"
	"io/fs"
	"os"
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

// CopyFile writes src's content to dst, a new file (it must not exist),
// with permissions perm, and fsyncs it when durable. On an error dst may
// be left behind, partly written; callers copy to a temporary name and
// rename.
func CopyFile(src, dst string, perm fs.FileMode, durable bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
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
