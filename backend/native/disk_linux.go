package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/overlay"
)

// The disk limit. Everything a run may write outside a direct workspace
// (the sandbox's /tmp and home, /dev/shm, and an overlay workspace's
// changes) lands on one tmpfs of the limit's size, so a write past it
// fails with ENOSPC, whichever of them it goes to. The tmpfs is mounted
// on the temporary root; /tmp, home and /dev/shm are directories of it
// bound into place. An overlay's upper layer lives there too during the
// run, with the change set's persistent upper layer as an extra lower
// layer under it; when the command has ended, init merges the run's
// layer into the persistent one (whiteouts and opaque directories
// included), so a session still accumulates and the change set still
// holds every change. Files and directories are copied with their mode;
// other extended attributes are not kept. The merge is not atomic (a
// directory made opaque is emptied before its entries are copied back, a
// replaced entry removed before the new one is made): while it runs, the
// persistent layer's root carries overlay.MergeXattr, which the host's
// review refuses, and keeps it if init is killed or the merge fails, so
// that a half-merged set is never applied.

const scratchDir = "/scratch"

// scratch is the disk-limit tmpfs of this run, nil without a limit.
type scratch struct {
	size int64
	n    int // directories handed out
	fd   int // the tmpfs root, kept open across pivot_root
	// For an overlay workspace: the run's upper layer and the change set's
	// persistent one, as fds that outlive the temporary root.
	upperFD, persistFD int
}

var disk *scratch

func mountScratch(size int64) error {
	if err := os.Mkdir(scratchDir, 0o755); err != nil {
		return fail("disk limit", err)
	}
	opts := "mode=0755," + backend.TmpfsOptions(size)
	if err := unix.Mount("tmpfs", scratchDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fail("disk limit: mount tmpfs", err)
	}
	fd, err := unix.Open(scratchDir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("disk limit", err)
	}
	disk = &scratch{size: size, fd: fd, upperFD: -1, persistFD: -1}
	return nil
}

// dir makes a fresh directory on the scratch tmpfs with the mode a tmpfs
// mount's options ask for ("mode=1777,...").
func (s *scratch) dir(options string) (string, error) {
	s.n++
	d := fmt.Sprintf("%s/d%d", scratchDir, s.n)
	mode := scratchMode(options)
	if err := os.Mkdir(d, 0o700); err != nil {
		return "", err
	}
	// Mkdir applies the umask and cannot set the sticky bit.
	return d, unix.Chmod(d, uint32(mode&os.ModePerm)|stickyBits(mode))
}

// scratchMode is the mode a tmpfs mount's options ask for ("mode=1777,...";
// 0755 without one), for the scratch directory that stands in for it.
func scratchMode(options string) os.FileMode {
	mode := os.FileMode(0o755)
	for _, o := range strings.Split(options, ",") {
		if v, ok := strings.CutPrefix(o, "mode="); ok {
			if m, err := strconv.ParseUint(v, 8, 32); err == nil {
				mode = os.FileMode(m)
			}
		}
	}
	return mode
}

func stickyBits(m os.FileMode) uint32 {
	if m&0o1000 != 0 || m&os.ModeSticky != 0 {
		return unix.S_ISVTX
	}
	return 0
}

// bindScratch binds a fresh scratch directory at target instead of a
// tmpfs of its own.
func (s *scratch) bind(target, options string) error {
	d, err := s.dir(options)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	return unix.Mount(d, target, "", unix.MS_BIND, "")
}

// overlayLayers prepares the run's upper and work directories on the
// scratch tmpfs and keeps fds to them and to the persistent upper layer,
// for the merge after the run.
func (s *scratch) overlayLayers(persist string) (upper, work string, err error) {
	upper, work = scratchDir+"/upper", scratchDir+"/work"
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", "", err
		}
	}
	// The merged root takes the upper root's attributes.
	var st unix.Stat_t
	if err := unix.Stat(persist, &st); err == nil {
		unix.Chmod(upper, st.Mode&0o7777)
	}
	if s.upperFD, err = unix.Open(upper, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return "", "", err
	}
	if s.persistFD, err = unix.Open(persist, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return "", "", err
	}
	// Until the merge, the run's changes are on this tmpfs only: the mark
	// says so (overlay.MergePending), so that a run or session killed
	// before it leaves a set the review refuses, not one that reads as
	// holding no changes. merge replaces it, and removes it once done.
	if err := unix.Fsetxattr(s.persistFD, overlay.MergeXattr, []byte(overlay.MergePending), 0); err != nil {
		return "", "", fmt.Errorf("mark the change set as waiting for the run's changes: %w", err)
	}
	return upper, work, nil
}

// full reports whether the scratch tmpfs is (nearly) out of space: a
// write was, or would have been, refused.
func (s *scratch) full() bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(s.fd, &st); err != nil {
		return false
	}
	return diskFull(int64(st.Bavail)*int64(st.Bsize), s.size) || inodesFull(st.Ffree, st.Files)
}

var diskFull, inodesFull = backend.DiskFull, backend.InodesFull

// merge folds the run's upper layer into the persistent one. It runs
// after the command and everything it started are gone.
func (s *scratch) merge() error {
	if s.upperFD < 0 {
		return nil
	}
	if err := unix.Fsetxattr(s.persistFD, overlay.MergeXattr, []byte("y"), 0); err != nil {
		return fmt.Errorf("mark the change set as being merged into: %w", err)
	}
	if err := mergeDir(fdPath(s.upperFD), fdPath(s.persistFD), map[[2]uint64]string{}); err != nil {
		return err // the mark stays: the layer may be torn
	}
	if err := unix.Fremovexattr(s.persistFD, overlay.MergeXattr); err != nil {
		return fmt.Errorf("unmark the change set as being merged into: %w", err)
	}
	return nil
}

func fdPath(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

const opaqueXattr = "user.overlay.opaque"

// testHookMergeEntry, when set (by tests), runs before mergeDir merges
// each entry, with its destination; an error stops the merge there, as a
// kill or a failed write would.
var testHookMergeEntry func(dst string) error

// mergeDir merges the upper layer's directory src into the persistent
// layer's dst. links maps each file of src with more than one name
// (device, inode) to where its first name was merged: the others are
// linked to it there. Copied once each, the names of one file took the
// tmpfs one inode each and the host's disk a copy each, so that a few
// MiB under the disk limit became hundreds on the host (found by a
// tester).
func mergeDir(src, dst string, links map[[2]uint64]string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if testHookMergeEntry != nil {
			if err := testHookMergeEntry(d); err != nil {
				return err
			}
		}
		fi, err := os.Lstat(s)
		if err != nil {
			return err
		}
		mode := fi.Sys().(*syscall.Stat_t).Mode // with the set-id and sticky bits
		switch mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if !overlay.IsWhiteout(fi) {
				continue
			}
			if err := os.RemoveAll(d); err != nil {
				return err
			}
			if err := unix.Mknod(d, unix.S_IFCHR, 0); err != nil {
				return fmt.Errorf("whiteout %s: %w", e.Name(), err)
			}
		case unix.S_IFDIR:
			opaque := false
			buf := make([]byte, 4)
			if n, err := unix.Lgetxattr(s, opaqueXattr, buf); err == nil && n > 0 && buf[0] == 'y' {
				opaque = true
			}
			var dt unix.Stat_t
			exists := unix.Lstat(d, &dt) == nil
			if exists && (opaque || dt.Mode&unix.S_IFMT != unix.S_IFDIR) {
				if err := os.RemoveAll(d); err != nil {
					return err
				}
				exists = false
			}
			if !exists {
				if err := unix.Mkdir(d, 0o700); err != nil {
					return err
				}
			} else if dt.Mode&0o700 != 0o700 {
				// The layer's directory has the mode an earlier run left
				// (0555, a module cache's; 000): its entries are merged
				// into it first, and the mode below set after.
				if err := unix.Chmod(d, dt.Mode&0o7777|0o700); err != nil {
					return err
				}
			}
			if opaque {
				if err := unix.Lsetxattr(d, opaqueXattr, []byte("y"), 0); err != nil {
					return fmt.Errorf("opaque %s: %w", e.Name(), err)
				}
			}
			ownerMay(s, mode, 0o500)
			if err := mergeDir(s, d, links); err != nil {
				return err
			}
			if err := unix.Chmod(d, mode&0o7777); err != nil {
				return err
			}
		case unix.S_IFREG:
			st := fi.Sys().(*syscall.Stat_t)
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[key]; ok && st.Nlink > 1 {
				if err := linkFile(first, d); err != nil {
					return err
				}
				continue
			}
			ownerMay(s, mode, 0o400)
			if err := replaceFile(s, d, mode&0o7777); err != nil {
				return err
			}
			if st.Nlink > 1 {
				links[key] = d
			}
		case unix.S_IFLNK:
			target, err := os.Readlink(s)
			if err != nil {
				return err
			}
			if err := os.RemoveAll(d); err != nil {
				return err
			}
			if err := os.Symlink(target, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// ownerMay gives src, an entry of the run's upper layer of mode mode,
// the owner permission bits the merge needs (read; search for a
// directory) when the command took them away (chmod 000): init, which
// merges, is its owner, without the capabilities to pass over its
// modes, and the file would be lost with the run (found by a tester).
// The copy takes mode, as it was. A directory of the persistent layer
// gets the same treatment in mergeDir.
func ownerMay(src string, mode, bits uint32) {
	if mode&bits != bits {
		unix.Chmod(src, mode&0o7777|bits)
	}
}

// linkFile replaces dst with a link to first, a file merged already,
// atomically.
func linkFile(first, dst string) error {
	return placeFile(dst, "link", func(tmp string) error { return os.Link(first, tmp) })
}

// replaceFile replaces dst with src's content and mode, atomically.
func replaceFile(src, dst string, mode uint32) error {
	return placeFile(dst, "copy", func(tmp string) error {
		if err := overlay.CopyFile(src, tmp, 0o600, false); err != nil {
			return err
		}
		return unix.Chmod(tmp, mode)
	})
}

// placeFile makes a file with make at a name beside dst, then renames it
// over dst (a directory there is removed first); what says what was done,
// for the error.
func placeFile(dst, what string, make func(tmp string) error) error {
	tmp := dst + ".moat-merge"
	os.Remove(tmp)
	err := make(tmp)
	if err == nil {
		var dt unix.Stat_t
		if unix.Lstat(dst, &dt) == nil && dt.Mode&unix.S_IFMT == unix.S_IFDIR {
			err = os.RemoveAll(dst)
		}
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return errors.Join(fmt.Errorf("%s %s", what, filepath.Base(dst)), err)
	}
	return nil
}
