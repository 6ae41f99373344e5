package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The overlay xattrs moat's backend mounts with (option userxattr). With
// userxattr the kernel supports neither redirect_dir nor metacopy, so an
// upper layer carrying those was not made by moat and is refused.
const (
	xattrOpaque   = "user.overlay.opaque"
	xattrRedirect = "user.overlay.redirect"
	xattrMetacopy = "user.overlay.metacopy"
)

// stamp is a file's status-change time: the kernel sets it on every change
// to the file's content, metadata or name, and user space cannot set it.
type stamp struct {
	Sec  int64 `json:"sec"`
	Nsec int64 `json:"nsec"`
}

func (s stamp) before(t stamp) bool {
	return s.Sec < t.Sec || (s.Sec == t.Sec && s.Nsec < t.Nsec)
}

// coarseNow is the kernel's coarse real-time clock, the one it stamps a
// changed inode with unless the filesystem uses multigrain timestamps.
func coarseNow() stamp {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts)
	return stamp{Sec: ts.Sec, Nsec: ts.Nsec}
}

// atimeOf is fi's access time, its modification time where unknown.
func atimeOf(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Atim.Sec, st.Atim.Nsec)
	}
	return fi.ModTime()
}

func ctimeOf(fi fs.FileInfo) stamp {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{}
	}
	return stamp{Sec: st.Ctim.Sec, Nsec: st.Ctim.Nsec}
}

// xattr returns the value of attribute name of path (not following
// symlinks), or "" when it is not set.
func xattr(path, name string) (string, error) {
	var buf [256]byte
	n, err := unix.Lgetxattr(path, name, buf[:])
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
		return "", nil
	}
	if errors.Is(err, unix.ERANGE) {
		return "?", nil
	}
	if errors.Is(err, unix.EACCES) && os.Geteuid() != 0 {
		// user.* attributes need read permission on the entry: a command
		// that took its owner's away (chmod 000) left it unreadable to
		// moat as the same user.
		mode := "?"
		if fi, serr := os.Lstat(path); serr == nil {
			mode = fmt.Sprintf("%04o", fi.Mode().Perm())
		}
		return "", fmt.Errorf("%s: the command left it unreadable to its owner (mode %s), and moat, run as that user, must read it to review or apply the change set: "+
			"discard the change set and run the command again so that it leaves its files readable to their owner (chmod -R u+rwX at its end; a --session NAME run can do that in the same change set): %w", path, mode, fs.ErrPermission)
	}
	if err != nil {
		return "", &os.PathError{Op: "getxattr " + name, Path: path, Err: err}
	}
	return string(buf[:n]), nil
}

func isOpaque(path string) (bool, error) {
	v, err := xattr(path, xattrOpaque)
	return v == "y", err
}

// checkOverlayFeatures refuses an upper entry that uses an overlay feature
// moat does not mount with (redirected directories, metadata-only copies).
func checkOverlayFeatures(path string, fi fs.FileInfo) error {
	name := xattrMetacopy
	if fi.IsDir() {
		name = xattrRedirect
	} else if !fi.Mode().IsRegular() {
		return nil
	}
	v, err := xattr(path, name)
	if err != nil {
		return err
	}
	if v != "" {
		return fmt.Errorf("%s: carries %s: %w", path, name, ErrUnsupportedLayer)
	}
	return nil
}

// flock takes an exclusive advisory lock on f without waiting.
func flock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return ErrBusy
	}
	return err
}

// blocksOf is the disk space fi occupies and its inode identity.
func blocksOf(fi fs.FileInfo) (size int64, dev, ino uint64, nlink uint64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi.Size(), 0, 0, 1
	}
	return st.Blocks * 512, st.Dev, st.Ino, uint64(st.Nlink)
}

// renameNoReplace renames oldpath to newpath unless newpath exists
// (fs.ErrExist), in one step: no window for another process to create
// newpath in between. Where the filesystem does not support that
// (errors.ErrUnsupported) the caller falls back to checking first.
func renameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		return errors.ErrUnsupported
	}
	return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
}

// pinnedDir is a workspace directory that Apply opened with no symlink
// on its path (see ChangeSet.parentOf). Its path names the directory
// opened, through /proc/self/fd, wherever it is now: a name the host
// swaps for a symlink afterwards does not redirect what is done there.
type pinnedDir struct {
	f    *os.File
	path string
}

// pinDir opens the directory at the absolute path p, refusing (ELOOP) a
// symlink on any component of p.
func pinDir(p string) (pinnedDir, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &how)
	for try := 0; errors.Is(err, unix.EAGAIN) && try < 10; try++ {
		fd, err = unix.Openat2(unix.AT_FDCWD, p, &how)
	}
	if err != nil {
		return pinnedDir{}, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return pinnedDir{f: os.NewFile(uintptr(fd), p), path: fmt.Sprintf("/proc/self/fd/%d", fd)}, nil
}

// openBeneath opens the directory rel (relative, "." for root itself)
// below root, resolving rel only below it: a symbolic link on the way is
// followed while it stays below root, and one that leads out of it, by an
// absolute target or "..", is refused (EXDEV), as is a magic link of
// /proc. Whatever the host renames or swaps above or below, what is
// opened is below the directory root pinned.
func openBeneath(root pinnedDir, rel string) (pinnedDir, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(int(root.f.Fd()), rel, &how)
	for try := 0; errors.Is(err, unix.EAGAIN) && try < 10; try++ {
		fd, err = unix.Openat2(int(root.f.Fd()), rel, &how)
	}
	if err != nil {
		return pinnedDir{}, &fs.PathError{Op: "open", Path: root.f.Name() + "/" + rel, Err: err}
	}
	return pinnedDir{f: os.NewFile(uintptr(fd), rel), path: fmt.Sprintf("/proc/self/fd/%d", fd)}, nil
}

// join names the entry name of the directory.
func (d pinnedDir) join(name string) string { return d.path + "/" + name }

// self names the directory itself, for Lstat (its path alone is the
// magic link in /proc).
func (d pinnedDir) self() string { return d.path + "/." }

func (d pinnedDir) Close() {
	if d.f != nil {
		d.f.Close()
	}
}

// chmodNoFollow is os.Chmod that refuses (ELOOP) a symlink at p instead of
// changing what it leads to: the entry is opened without following it,
// and the mode set through that descriptor.
func chmodNoFollow(p string, mode fs.FileMode) error {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "chmod", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "chmod", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return &fs.PathError{Op: "chmod", Path: p, Err: unix.ELOOP}
	}
	return os.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), mode)
}

// lstatBeneath is lstat of rel (relative, not ".") below root, its
// directories resolved as openBeneath resolves them and its last
// component not followed: one lookup, with no descriptor kept.
func lstatBeneath(root pinnedDir, rel string) (fs.FileInfo, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(int(root.f.Fd()), rel, &how)
	for try := 0; errors.Is(err, unix.EAGAIN) && try < 10; try++ {
		fd, err = unix.Openat2(int(root.f.Fd()), rel, &how)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: root.f.Name() + "/" + rel, Err: err}
	}
	// os's own stat of the descriptor (fstat works on an O_PATH one):
	// the link itself when rel names one.
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	return f.Stat()
}

// readNoFollow looks up p once, without following a link there, and
// returns what it found: a link's target (isLink), or at most n bytes of
// a regular file, opened through the descriptor of that lookup (so
// without blocking, and never a device); anything else is an error.
func readNoFollow(p string, n int) (target string, isLink bool, b []byte, err error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false, nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", false, nil, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		m, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return "", false, nil, &fs.PathError{Op: "readlink", Path: p, Err: err}
		}
		return string(buf[:m]), true, nil, nil
	case unix.S_IFREG:
	default:
		return "", false, nil, &fs.PathError{Op: "open", Path: p, Err: errors.New("not a regular file")}
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", false, nil, err
	}
	defer f.Close()
	b = make([]byte, n)
	m, err := io.ReadFull(f, b)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", false, nil, err
	}
	return "", false, b[:m], nil
}

// renameWritable retries the move of name, in parent, to dst that the
// permissions refused (err). A command that runs as the workspace's owner
// can take the write bit off the directory holding what it planted, or
// off a directory it planted (moved to another parent, a directory must
// be writable itself, for its ".."), so that the quarantine fails and the
// plant stays. Without root, the host's user is that owner too: it gives
// itself write permission on both, moves, and puts the parent's mode
// back. What it does not own stays refused, with err.
func renameWritable(parent pinnedDir, name, dst string, err error) error {
	uid := uint32(os.Geteuid())
	var pst, st unix.Stat_t
	if unix.Fstat(int(parent.f.Fd()), &pst) != nil || pst.Uid != uid ||
		unix.Fstatat(int(parent.f.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return err
	}
	if pst.Mode&0o300 != 0o300 {
		if unix.Chmod(parent.path, pst.Mode&0o7777|0o300) != nil {
			return err
		}
		defer unix.Chmod(parent.path, pst.Mode&0o7777)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Uid == uid && st.Mode&0o200 == 0 {
		fd, oerr := unix.Openat(int(parent.f.Fd()), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if oerr != nil {
			return err
		}
		cerr := unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), st.Mode&0o7777|0o200)
		unix.Close(fd)
		if cerr != nil {
			return err
		}
	}
	return os.Rename(parent.join(name), dst)
}

// openReview opens the file at the absolute path p for the review (diff,
// changes), refusing a symbolic link on any component of p (ELOOP) and
// anything but a regular file, or a directory with dir, and never waiting
// on a FIFO. The review reads a change set's upper layer while a session
// may still run in it: a command that swapped a file it had written for
// a link between the walk and the read had moat read, as root, wherever
// the link led (/etc/shadow, in the diff an agent asked for; found by a
// tester), and a FIFO swapped in hung the diff. The roots the review
// starts from are resolved first, so that only what lies below them is
// held to this.
func openReview(p string, dir bool) (*os.File, error) {
	flags := uint64(unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY)
	if dir {
		flags |= unix.O_DIRECTORY
	}
	how := unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &how)
	for try := 0; errors.Is(err, unix.EAGAIN) && try < 10; try++ {
		fd, err = unix.Openat2(unix.AT_FDCWD, p, &how)
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, &fs.PathError{Op: "open", Path: p, Err: errChangedUnderReview}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && !(dir && t == unix.S_IFDIR) {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: p, Err: errChangedUnderReview}
	}
	return f, nil
}

// hasACL reports whether p has an access ACL beyond its mode bits.
func hasACL(p string) bool {
	n, err := unix.Getxattr(p, "system.posix_acl_access", nil)
	return err == nil && n > 0
}

// defaultACL is the name of the extended attribute holding a directory's
// default ACL: the entries every file later made in it inherits.
const defaultACL = "system.posix_acl_default"

// hasDefaultACL reports whether the directory at p has a default ACL.
func hasDefaultACL(p string) bool {
	n, err := unix.Getxattr(p, defaultACL, nil)
	return err == nil && n > 0
}

// accessACL is the name of the extended attribute holding the ACL of the
// directory itself (its named entries; the mode shows the rest).
const accessACL = "system.posix_acl_access"

// openDefaultACL reports whether the directory at p has a default ACL
// that lets others than the owner and the owning group write what is
// made there: write for other, or for a named user or group.
func openDefaultACL(p string) bool { return openACL(p, defaultACL) }

// openAccessACL reports whether the directory at p itself may be written
// by a user or group its ACL names.
func openAccessACL(p string) bool { return openACL(p, accessACL) }

// hasAnyACL reports whether p has an ACL of its own or a default one.
func hasAnyACL(p string) bool {
	n, err := unix.Getxattr(p, accessACL, nil)
	return err == nil && n > 0 || hasDefaultACL(p)
}

// removeAccessACL removes the directory's ACL: its mode alone is left.
func removeAccessACL(p string) error { return unix.Removexattr(p, accessACL) }

// openACL reports whether the ACL in attribute name of p grants write to
// other or to a named user or group.
func openACL(p, name string) bool {
	buf := make([]byte, 4+8*64)
	n, err := unix.Getxattr(p, name, buf)
	if err != nil || n < 4 {
		return errors.Is(err, unix.ERANGE) // too many entries to be a plain one
	}
	for e := buf[4:n]; len(e) >= 8; e = e[8:] {
		tag, perm := uint16(e[0])|uint16(e[1])<<8, uint16(e[2])|uint16(e[3])<<8
		// ACL_USER 2, ACL_GROUP 8, ACL_OTHER 0x20; ACL_WRITE 2.
		if (tag == 2 || tag == 8 || tag == 0x20) && perm&2 != 0 {
			return true
		}
	}
	return false
}

// removeDefaultACL removes the directory's default ACL.
func removeDefaultACL(p string) error { return unix.Removexattr(p, defaultACL) }

func removeXattr(path, name string) error { return unix.Lremovexattr(path, name) }
