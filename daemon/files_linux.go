package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/sandbox"
)

// beneath is how every path of the files API is resolved.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// openBeneath opens rel beneath the session's root.
func (s *Session) openBeneath(rel string, flags uint64, mode uint64) (*os.File, error) {
	fd, err := unix.Openat2(int(s.root.Fd()), rel, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Mode: mode, Resolve: beneath})
	for err == unix.EINTR || err == unix.EAGAIN {
		fd, err = unix.Openat2(int(s.root.Fd()), rel, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Mode: mode, Resolve: beneath})
	}
	if err != nil {
		return nil, s.pathError(rel, err)
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// pathError turns an errno into an error safe to show: it names only the
// path as the tenant gave it.
func (s *Session) pathError(rel string, err error) error {
	switch {
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w: %q leads out of the workspace", ErrWorkspace, rel)
	case errors.Is(err, unix.ELOOP):
		// Beneath the root, with no escape (that is EXDEV): a loop of
		// links, or more of them on the way than the kernel follows.
		return fmt.Errorf("%w: %q meets a loop of symbolic links (or more links on its way than the kernel follows)", ErrWorkspace, rel)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: %q", ErrNoFile, rel)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%w: a component of %q is not a directory", ErrBadRequest, rel)
	case errors.Is(err, unix.EISDIR):
		return fmt.Errorf("%w: %q is a directory", ErrBadRequest, rel)
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("%w: the files API needs openat2 (Linux 5.6)", ErrUnsupportedMode)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w: %q: permission denied", ErrWorkspace, rel)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return fmt.Errorf("%w: %q: no space left in the workspace", ErrQuota, rel)
	}
	return fmt.Errorf("%q: %w", rel, err)
}

// parent opens the directory that holds rel and returns it with rel's
// last component and the directory's real path relative to the root.
func (s *Session) parent(rel string) (dir *os.File, base, dirRel string, err error) {
	if rel == "." {
		return nil, "", "", fmt.Errorf("%w: the workspace root itself", ErrBadRequest)
	}
	d, base := path.Split(rel)
	if d == "" {
		d = "."
	}
	dir, err = s.openBeneath(d, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, "", "", err
	}
	dirRel, err = s.realRel(dir)
	if err != nil {
		dir.Close()
		return nil, "", "", err
	}
	return dir, base, dirRel, nil
}

// realRel is where f really is, relative to the root: links inside the
// workspace resolved, for the protected-path check.
func (s *Session) realRel(f *os.File) (string, error) {
	root, err1 := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(s.root.Fd())))
	p, err2 := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err := errors.Join(err1, err2); err != nil {
		return "", err
	}
	if p == root {
		return ".", nil
	}
	rel, ok := strings.CutPrefix(p, strings.TrimSuffix(root, "/")+"/")
	if !ok {
		return "", fmt.Errorf("%w: the path leads out of the workspace", ErrWorkspace)
	}
	return rel, nil
}

// hidden refuses rel (clean, as asked for) when the policy hides it from
// the session's commands (readable), whether it exists or not: a path
// below a hidden directory is refused as the directory is, so that what
// is in it cannot be probed by the answer (the session's commands get
// EACCES there too). Its links are resolved beneath the root as far as
// they exist, as the read path resolves them; follow says whether a link
// at rel itself is followed (not for Stat, which describes the link).
// The rest of rel, from the first component that does not resolve, is
// joined as written. The caller still checks the entry it opens, which
// is what counts against a link changed meanwhile.
func (s *Session) hidden(rel string, follow bool) error {
	if s.policy == nil || len(s.fsLists().deny) == 0 {
		return nil
	}
	p, rest := rel, ""
	if !follow && rel != "." {
		p, rest = path.Dir(rel), path.Base(rel)
	}
	for {
		f, err := s.openBeneath(p, unix.O_PATH, 0)
		if err == nil {
			real, err := s.realRel(f)
			f.Close()
			if err != nil {
				return nil // the operation's own check answers
			}
			if rest != "" {
				real = joinRel(real, rest)
			}
			return s.readable(rel, real)
		}
		if p == "." {
			return nil
		}
		// Missing, not a directory, leading out or a loop: the
		// directory above decides, the rest named as written.
		if rest == "" {
			rest = path.Base(p)
		} else {
			rest = path.Base(p) + "/" + rest
		}
		p = path.Dir(p)
	}
}

// ReadFile returns the content of the regular file rel.
func (s *Session) ReadFile(rel string) ([]byte, error) {
	if namesDir(rel) {
		// As open(2) would: a name with a trailing slash is a
		// directory's, never the file's without it.
		return nil, fmt.Errorf("%w: path %q names a directory; give the file's path", ErrBadRequest, rel)
	}
	rel, err := cleanRel(rel)
	if err == nil {
		err = s.filesAllowed(false)
	}
	if err != nil {
		return nil, err
	}
	s.touch()
	done, err := s.useFiles()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := s.hidden(rel, true); err != nil {
		return nil, err
	}
	f, err := s.openBeneath(rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if errors.Is(err, unix.ENXIO) {
		// A unix socket, which open(2) refuses so: no file to read,
		// not the daemon's failure.
		return nil, fmt.Errorf("%w: %q is not a regular file (a socket)", ErrBadRequest, rel)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	real, err := s.realRel(f)
	if err == nil {
		err = s.readable(rel, real)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %q is not a regular file", ErrBadRequest, rel)
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("%w: %q is over %d bytes", ErrQuota, rel, MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err == nil && len(data) > MaxFileSize {
		err = fmt.Errorf("%w: %q is over %d bytes", ErrQuota, rel, MaxFileSize)
	}
	return data, err
}

// WriteFile replaces rel with data atomically: a temporary file in the
// same directory, owned by the workspace's owner, renamed over it. The
// directory must exist. The policy's write rules decide it first (see
// writerules.go): ctx bounds an ask and carries its approver.
func (s *Session) WriteFile(ctx context.Context, rel string, data []byte, perm fs.FileMode) (err error) {
	if namesDir(rel) {
		// A directory's name: the file would be made under another name
		// than the one meant (moat cp f S:dir/).
		return fmt.Errorf("%w: path %q names a directory; give the file's path in it", ErrBadRequest, rel)
	}
	rel, err = cleanRel(rel)
	if err == nil {
		err = s.filesAllowed(true)
	}
	if err != nil {
		return err
	}
	if len(data) > MaxFileSize {
		return fmt.Errorf("%w: %d bytes is over %d", ErrQuota, len(data), MaxFileSize)
	}
	if s.protected(rel) {
		return fmt.Errorf("%w: %q is protected: host tools run or read it", ErrProtected, rel)
	}
	d, err := s.checkWrite(ctx, sandbox.WriteFile, rel)
	if err != nil {
		return err
	}
	s.touch()
	done, err := s.useFiles()
	if err != nil {
		return err
	}
	defer done()
	// Written under a temporary name and renamed over rel, as a tar
	// upload's entries are (place).
	return s.place(rel, d, func(dir *os.File, tmp string) error {
		fd, err := unix.Openat(int(dir.Fd()), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), tmp)
		_, err = f.Write(data) // a bounded workspace may be full
		if err == nil {
			err = f.Chmod(perm.Perm()) // the umask does not decide
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// writable cleans rel and says whether the session's files API may
// change it: a workspace that accepts writes, and no protected path.
func (s *Session) writable(rel string) (string, error) {
	rel, err := cleanRel(rel)
	if err == nil {
		err = s.filesAllowed(true)
	}
	if err != nil {
		return "", err
	}
	if s.protected(rel) {
		return "", fmt.Errorf("%w: %q is protected: host tools run or read it", ErrProtected, rel)
	}
	return rel, nil
}

// Mkdir makes the directory rel, owned by the workspace's owner; its
// parent must exist. An existing directory is not an error. The write
// rules decide it first, as for WriteFile.
func (s *Session) Mkdir(ctx context.Context, rel string) error {
	rel, err := s.writable(rel)
	if err != nil {
		return err
	}
	d, err := s.checkWrite(ctx, sandbox.WriteMkdir, rel)
	if err != nil {
		return err
	}
	done, err := s.useFiles()
	if err != nil {
		return err
	}
	defer done()
	return s.mkdir(rel, d)
}

// mkdir makes the directory rel, clean and writable, which the write
// rules decided with d (Mkdir, or an upload that decided every path
// first).
func (s *Session) mkdir(rel string, d harness.Decision) error {
	s.touch()
	dir, base, err := s.target(sandbox.WriteMkdir, rel, d)
	if err != nil {
		return err
	}
	defer dir.Close()
	err = unix.Mkdirat(int(dir.Fd()), base, 0o755)
	if errors.Is(err, unix.EEXIST) {
		// A directory already, or a link to one, resolved beneath the
		// root like every other path.
		d, err := s.openBeneath(rel, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		return d.Close()
	}
	if err != nil {
		return s.pathError(rel, err)
	}
	if os.Geteuid() == 0 {
		var st unix.Stat_t
		if err := unix.Fstat(int(s.root.Fd()), &st); err != nil {
			return err
		}
		if err := unix.Fchownat(int(dir.Fd()), base, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}

// Remove removes the file, link or empty directory rel. The write rules
// decide it first, as for WriteFile.
func (s *Session) Remove(ctx context.Context, rel string) error {
	dirOnly := namesDir(rel)
	rel, err := s.writable(rel)
	if err != nil {
		return err
	}
	d, err := s.checkWrite(ctx, sandbox.WriteRemove, rel)
	if err != nil {
		return err
	}
	s.touch()
	done, err := s.useFiles()
	if err != nil {
		return err
	}
	defer done()
	dir, base, err := s.target(sandbox.WriteRemove, rel, d)
	if err != nil {
		return err
	}
	defer dir.Close()
	if dirOnly {
		// "dir/" removes a directory only, as rmdir(2) reads it.
		err = unix.Unlinkat(int(dir.Fd()), base, unix.AT_REMOVEDIR)
		if err == unix.ENOTDIR {
			return fmt.Errorf("%w: %q is not a directory", ErrBadRequest, rel)
		}
	} else {
		err = unix.Unlinkat(int(dir.Fd()), base, 0)
		if err == unix.EISDIR || err == unix.EPERM {
			err = unix.Unlinkat(int(dir.Fd()), base, unix.AT_REMOVEDIR)
		}
	}
	if err == unix.ENOTEMPTY || err == unix.EEXIST {
		return fmt.Errorf("%w: directory %q is not empty", ErrBadRequest, rel)
	}
	if err != nil {
		return s.pathError(rel, err)
	}
	return nil
}

// Stat describes rel itself (a link is not followed).
func (s *Session) Stat(rel string) (*FileInfo, error) {
	dirOnly := namesDir(rel)
	rel, err := cleanRel(rel)
	if err == nil {
		err = s.filesAllowed(false)
	}
	if err != nil {
		return nil, err
	}
	s.touch()
	done, err := s.useFiles()
	if err != nil {
		return nil, err
	}
	defer done()
	// A hidden path is refused as the read path refuses it, there or
	// not (hidden), and checked again where it really is.
	if err := s.hidden(rel, false); err != nil {
		return nil, err
	}
	if rel == "." {
		fi, err := s.root.Stat()
		if err != nil {
			return nil, err
		}
		return info(".", fi), nil
	}
	dir, base, dirRel, err := s.parent(rel)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	if err := s.readable(rel, joinRel(dirRel, base)); err != nil {
		return nil, err
	}
	fi, err := s.statAt(dir, base, rel)
	if err == nil && dirOnly && fi.Type == "file" {
		// As stat(2) reads "file/": not a directory.
		return nil, fmt.Errorf("%w: %q is not a directory", ErrBadRequest, rel)
	}
	return fi, err
}

// Resolve returns where the existing entry rel really is, relative to the
// root: every link on the way followed beneath it (ErrWorkspace for one
// leading out or a path the policy hides, ErrNoFile for one leading
// nowhere). A tool that edits a file through its path uses it to change
// a link's target rather than replace the link.
func (s *Session) Resolve(rel string) (string, error) {
	rel, err := cleanRel(rel)
	if err == nil {
		err = s.filesAllowed(false)
	}
	if err != nil {
		return "", err
	}
	done, err := s.useFiles()
	if err != nil {
		return "", err
	}
	defer done()
	if err := s.hidden(rel, true); err != nil {
		return "", err
	}
	f, err := s.openBeneath(rel, unix.O_PATH, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	real, err := s.realRel(f)
	if err == nil {
		err = s.readable(rel, real)
	}
	if err != nil {
		return "", err
	}
	return real, nil
}

func (s *Session) statAt(dir *os.File, name, rel string) (*FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH); err != nil {
		return nil, s.pathError(rel, err)
	}
	mode := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFREG:
	default:
		mode |= fs.ModeIrregular
	}
	return &FileInfo{Path: rel, Type: fileType(mode), Size: st.Size, Mode: mode.Perm(), ModTime: time.Unix(st.Mtim.Unix())}, nil
}

func info(rel string, fi fs.FileInfo) *FileInfo {
	return &FileInfo{Path: rel, Type: fileType(fi.Mode()), Size: fi.Size(), Mode: fi.Mode().Perm(), ModTime: fi.ModTime()}
}

// List describes the entries of directory rel, sorted by name; at most
// maxEntries (truncated says whether there were more).
func (s *Session) List(rel string) (entries []*FileInfo, truncated bool, err error) {
	rel, err = cleanRel(rel)
	if err == nil {
		err = s.filesAllowed(false)
	}
	if err != nil {
		return nil, false, err
	}
	s.touch()
	done, err := s.useFiles()
	if err != nil {
		return nil, false, err
	}
	defer done()
	if err := s.hidden(rel, true); err != nil {
		return nil, false, err
	}
	d, err := s.openBeneath(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, false, err
	}
	defer d.Close()
	real, err := s.realRel(d)
	if err == nil {
		err = s.readable(rel, real)
	}
	if err != nil {
		return nil, false, err
	}
	names, err := d.Readdirnames(maxEntries + 1)
	if err != nil && err != io.EOF {
		return nil, false, s.pathError(rel, err)
	}
	if len(names) > maxEntries {
		names, truncated = names[:maxEntries], true
	}
	slices.Sort(names)
	var denied []string
	if s.policy != nil {
		denied = s.fsLists().deny
	}
	for _, n := range names {
		if underAny(joinRel(real, n), denied) {
			continue // hidden from the session's commands, as in a download (Tar)
		}
		fi, err := s.statAt(d, n, joinRel(rel, n))
		if err != nil {
			continue // removed meanwhile
		}
		entries = append(entries, fi)
	}
	return entries, truncated, nil
}

// target opens the directory op (a change the write rules decided at rel
// with d) makes its entry in, and names the entry: its real place is
// checked against the protected paths and, where links lead elsewhere,
// against the write rules again. The caller closes dir.
func (s *Session) target(op, rel string, d harness.Decision) (dir *os.File, base string, err error) {
	// Below a hidden directory the answer is the same, there or not.
	if err := s.hidden(rel, false); err != nil {
		return nil, "", err
	}
	dir, base, dirRel, err := s.parent(rel)
	if err != nil {
		return nil, "", err
	}
	real := joinRel(dirRel, base)
	if s.protected(real) {
		err = fmt.Errorf("%w: %q is protected: host tools run or read it", ErrProtected, rel)
	} else if err = s.changeable(rel, real); err == nil {
		err = s.followWrite(op, rel, real, d)
	}
	if err != nil {
		dir.Close()
		return nil, "", err
	}
	return dir, base, nil
}
