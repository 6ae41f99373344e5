package daemon

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// spool makes the unlinked file an upload is held in until every entry
// is checked. Under a disk quota the session's workspace is a tmpfs of
// its limits.disk (boundWorkspace), and the spool is made there, without
// a name (O_TMPFILE), so that no command sees it: what an upload holds
// while it waits then counts against the tenant's quota, and a full
// tmpfs refuses it (ENOSPC). Elsewhere the spool is in the daemon's
// state directory, bounded by MaxTenantUploads.
func (s *Session) spool() (*os.File, error) {
	if !s.wsTmpfs {
		if s.m.cfg.TenantDisk > 0 {
			// Not reached: under a disk quota, reserveLimits admits no
			// session whose files API writes elsewhere than its tmpfs.
			return nil, fmt.Errorf("%w: this daemon bounds each tenant's disk (--tenant-disk), and this workspace has no tmpfs to hold an upload", ErrQuota)
		}
		f, err := os.CreateTemp(s.m.dir, "upload-")
		if err != nil {
			return nil, fmt.Errorf("spool an upload: %w", err)
		}
		os.Remove(f.Name())
		return f, nil
	}
	release, err := s.useRoot()
	if err != nil {
		return nil, err
	}
	defer release()
	fd, err := unix.Openat(int(s.root.Fd()), ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool an upload in the workspace: %w", err)
	}
	return os.NewFile(uintptr(fd), "upload"), nil
}

// spoolWriter tells the spool's write errors apart from the reader's: a
// full spool is the tenant's quota, not a bad request.
type spoolWriter struct{ f *os.File }

type spoolFull struct{ err error }

func (e *spoolFull) Error() string { return e.err.Error() }
func (e *spoolFull) Unwrap() error { return e.err }

func (w *spoolWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		err = &spoolFull{err}
	}
	return n, err
}

// whileLive reads an upload's body while its session lives: one ended
// meanwhile (deleted, its TTL) stops the reading with ErrEnded rather
// than take in the rest of a body nothing will be written from.
type whileLive struct {
	s *Session
	r io.Reader
}

func (w *whileLive) Read(p []byte) (int, error) {
	release, err := w.s.useRoot()
	if err != nil {
		return 0, err
	}
	release()
	return w.r.Read(p)
}

// Untar writes the tar archive r into the directory dir of the workspace
// (made with its parents when missing). See tar.go for what it refuses.
//
// The policy's write rules decide every path it would make (dir and its
// parents, each entry and the directories on its way) before anything
// is written: one refused refuses the upload. ctx bounds an ask and
// carries its approver (WithApprover).
func (s *Session) Untar(ctx context.Context, dir string, r io.Reader) (*TarReport, error) {
	dir, err := cleanRel(dir)
	if err == nil {
		err = s.filesAllowed(true)
	}
	if err != nil {
		return nil, err
	}
	if dir != "." && s.protected(dir) {
		return nil, fmt.Errorf("%w: %q is protected: host tools run or read it", ErrProtected, dir)
	}
	s.touch()
	ended, err := s.m.startUpload(s.Tenant.ID)
	if err != nil {
		return nil, err
	}
	defer ended()
	// The archive is kept whole before anything is written, so that every
	// entry is checked first; in an unlinked file, which nothing can leave
	// behind.
	spool, err := s.spool()
	if err != nil {
		return nil, err
	}
	defer spool.Close()
	n, err := io.Copy(&spoolWriter{spool}, io.LimitReader(&whileLive{s, r}, MaxTarBytes+1))
	var full *spoolFull
	if errors.Is(err, ErrEnded) {
		return nil, err
	}
	if errors.As(err, &full) {
		return nil, fmt.Errorf("%w: the archive does not fit in the workspace's limits.disk (%s), which the daemon's disk quota for each tenant (--tenant-disk) counts: an archive is held there whole until its entries are checked, and its files then need as much again", ErrQuota, policy.Size(s.policy.Limits.Disk))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading the archive: %w", ErrBadRequest, err)
	}
	if n > MaxTarBytes {
		return nil, fmt.Errorf("%w: the archive is over %d bytes", ErrQuota, MaxTarBytes)
	}
	var entries []*tarEntry
	var size int64 // the files' bytes, which a sparse entry makes more than the archive's
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	tr := tar.NewReader(spool)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: not a valid tar archive: %v", ErrBadRequest, err)
		}
		e, err := s.checkTarEntry(dir, h)
		if err != nil {
			return nil, err
		}
		if e == nil {
			continue
		}
		if len(entries) == MaxTarEntries {
			return nil, fmt.Errorf("%w: the archive has over %d entries", ErrQuota, MaxTarEntries)
		}
		if size += e.size; size > MaxTarBytes {
			return nil, fmt.Errorf("%w: the archive's files are over %d bytes", ErrQuota, MaxTarBytes)
		}
		entries = append(entries, e)
	}
	// The check resolves paths beneath the root, which the session's
	// end closes (and its descriptor number may then name another's).
	release, err := s.useRoot()
	if err != nil {
		return nil, err
	}
	places, err := s.checkTarPaths(dir, entries)
	release()
	if err != nil {
		return nil, err
	}
	decided, err := s.decideTar(ctx, dir, entries)
	if err == nil {
		err = s.followTar(places, entries, decided)
	}
	if err != nil {
		return nil, err
	}

	done, err := s.useFiles()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := s.mkdirAll(dir, decided); err != nil {
		return nil, err
	}
	spool.Seek(0, io.SeekStart)
	tr = tar.NewReader(spool)
	rep := &TarReport{}
	for _, e := range entries {
		// The entries come in the archive's order; skipped ones too.
		for {
			h, err := tr.Next()
			if err != nil {
				return rep, fmt.Errorf("%w: the archive changed while read", ErrBadRequest)
			}
			if c, _ := s.checkTarEntry(dir, h); c != nil {
				break
			}
		}
		if err := s.mkdirAll(path.Dir(e.rel), decided); err != nil {
			return rep, err
		}
		switch e.typ {
		case tar.TypeDir:
			err = s.mkdirAll(e.rel, decided)
			if err == nil {
				err = s.chmodBeneath(e.rel, decided[e.rel], e.mode)
			}
		case tar.TypeSymlink:
			err = s.place(e.rel, decided[e.rel], func(dir *os.File, tmp string) error {
				return unix.Symlinkat(e.target, int(dir.Fd()), tmp)
			})
		default:
			err = s.place(e.rel, decided[e.rel], func(dir *os.File, tmp string) error {
				fd, err := unix.Openat(int(dir.Fd()), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(e.mode))
				if err != nil {
					return err
				}
				f := os.NewFile(uintptr(fd), tmp)
				defer f.Close()
				if _, err := io.CopyN(f, tr, e.size); err != nil {
					return err
				}
				if err := f.Chmod(e.mode); err != nil { // the umask does not decide
					return err
				}
				return f.Close()
			})
		}
		if err != nil {
			return rep, err
		}
		rep.Entries++
		rep.Bytes += e.size
	}
	return rep, nil
}

// place makes rel atomically: make writes a new entry named tmp in the
// directory it is given, which is then owned by the workspace's owner and renamed
// over rel. rel's real place is checked against the protected paths, and
// against the write rules, which decided rel with d.
func (s *Session) place(rel string, d harness.Decision, make func(dir *os.File, tmp string) error) (err error) {
	dir, base, err := s.target(sandbox.WriteFile, rel, d)
	if err != nil {
		return err
	}
	defer dir.Close()
	// The new entry is made at the workspace's root, where a daemon killed
	// mid-write leaves it for the next daemon to remove (reapWrites)
	// without walking the tree; beside rel only when rel's directory is on
	// another filesystem (a mount inside the workspace), where a rename
	// from the root cannot reach.
	var rootSt, dirSt unix.Stat_t
	if err := unix.Fstat(int(s.root.Fd()), &rootSt); err != nil {
		return err
	}
	if err := unix.Fstat(int(dir.Fd()), &dirSt); err != nil {
		return err
	}
	at := s.root
	if rootSt.Dev != dirSt.Dev {
		at = dir
	}
	tmp := writeTempPrefix + newID()
	err = make(at, tmp)
	if at != dir && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
		// A root the daemon may not write, above a directory it may.
		unix.Unlinkat(int(at.Fd()), tmp, 0)
		at = dir
		err = make(at, tmp)
	}
	if err != nil {
		unix.Unlinkat(int(at.Fd()), tmp, 0)
		return s.pathError(rel, err)
	}
	defer func() {
		if err != nil {
			unix.Unlinkat(int(at.Fd()), tmp, 0)
		}
	}()
	if os.Geteuid() == 0 {
		if err := unix.Fchownat(int(at.Fd()), tmp, int(rootSt.Uid), int(rootSt.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if err := unix.Renameat(int(at.Fd()), tmp, int(dir.Fd()), base); err != nil {
		return s.pathError(rel, err)
	}
	return nil
}

// mkdirAll makes the directory rel and its missing parents, as Mkdir,
// each decided by the write rules already (decided).
func (s *Session) mkdirAll(rel string, decided map[string]harness.Decision) error {
	if rel == "." {
		return nil
	}
	p := "."
	for _, c := range strings.Split(rel, "/") {
		p = joinRel(p, c)
		if _, err := s.writable(p); err != nil {
			return err
		}
		if err := s.mkdir(p, decided[p]); err != nil {
			return err
		}
	}
	return nil
}

// decideTar decides by the write rules every path an upload of entries
// into dir makes, before it makes any: each directory on the way as a
// mkdir, each entry as a write (a directory entry as a mkdir). It
// returns each path's decision, for the links met while writing.
func (s *Session) decideTar(ctx context.Context, dir string, entries []*tarEntry) (map[string]harness.Decision, error) {
	ops := map[string]string{}
	dirs := func(rel string) {
		for p := rel; p != "." && p != "/" && p != ""; p = path.Dir(p) {
			if _, ok := ops[p]; !ok {
				ops[p] = sandbox.WriteMkdir
			}
		}
	}
	dirs(dir)
	for _, e := range entries {
		dirs(path.Dir(e.rel))
		if e.typ == tar.TypeDir {
			dirs(e.rel)
		} else {
			ops[e.rel] = sandbox.WriteFile
		}
	}
	paths := make([]string, 0, len(ops))
	for p := range ops {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	decided := make(map[string]harness.Decision, len(paths))
	for _, p := range paths {
		d, err := s.checkWrite(ctx, ops[p], p)
		if err != nil {
			return nil, err
		}
		decided[p] = d
	}
	return decided, nil
}

// chmodBeneath sets the permission bits of the directory rel, which the
// write rules decided with d: the directory at rel itself, never one a
// link there leads to (a protected directory, the root), which a link's
// path checked against the protected paths would not show.
func (s *Session) chmodBeneath(rel string, d harness.Decision, mode fs.FileMode) error {
	dir, base, err := s.target(sandbox.WriteMkdir, rel, d)
	if err != nil {
		return err
	}
	defer dir.Close()
	fd, err := unix.Openat(int(dir.Fd()), base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%w: %q is a symbolic link, where the archive has a directory", ErrBadRequest, rel)
	}
	if err != nil {
		return s.pathError(rel, err)
	}
	defer unix.Close(fd)
	return unix.Fchmod(fd, uint32(mode|0o700)) // the owner keeps its way in
}

// Tar writes the directory dir of the workspace to w as a tar archive:
// regular files, directories and symbolic links (as links, never
// followed); other files are left out. Past MaxTarEntries entries,
// MaxTarBytes bytes of files or MaxTarDepth levels it stops with ErrQuota.
// An entry the daemon cannot read (a command made it mode 000) is left
// out and named in the LeftOut it returns with the archive, so that an
// archive short of it never reads as the whole directory.
func (s *Session) Tar(dir string, w io.Writer) (*LeftOut, error) {
	left := &LeftOut{}
	return left, s.tar(dir, w, left)
}

func (s *Session) tar(dir string, w io.Writer, left *LeftOut) error {
	dir, err := cleanRel(dir)
	if err == nil {
		err = s.filesAllowed(false)
	}
	if err != nil {
		return err
	}
	s.touch()
	done, err := s.useFiles()
	if err != nil {
		return err
	}
	defer done()
	if err := s.hidden(dir, true); err != nil {
		return err
	}
	d, err := s.openBeneath(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	real, err := s.realRel(d)
	if err == nil {
		err = s.readable(dir, real)
	}
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	t := &tarWalk{s: s, tw: tw, real: real, left: left}
	if s.policy != nil {
		t.denied = s.fsLists().deny
	}
	if err := t.dir(d, ""); err != nil {
		return err
	}
	return tw.Close()
}

type tarWalk struct {
	s       *Session
	real    string   // the directory's real path, relative to the root
	denied  []string // what the session's commands do not see, relative to the root
	tw      *tar.Writer
	entries int
	bytes   int64
	depth   int // directories open below the one asked for
	left    *LeftOut
}

// testHookTarOpen, when set (by tests run as root, whom no mode keeps
// out), fails the opening of an entry as the kernel would.
var testHookTarOpen func(name string) error

// dir writes the entries of the open directory d, named below prefix.
// It reads the directory a batch of names at a time, so a directory of
// millions of entries costs the daemon no more memory than a small one
// before MaxTarEntries stops the walk.
//
// A name is written once: a directory read in batches while a command
// renames in it can list a name again (XFS does), and an archive naming
// a link and then a directory of the same name led an extractor through
// the link (found by a tester).
func (t *tarWalk) dir(d *os.File, prefix string) error {
	seen := map[string]bool{}
	for {
		names, err := d.Readdirnames(tarDirBatch)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		fresh := names[:0]
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				fresh = append(fresh, n)
			}
		}
		if err := t.names(d, prefix, fresh); err != nil {
			return err
		}
	}
}

// tarDirBatch is how many names tarWalk.dir reads at a time.
const tarDirBatch = 256

// names writes the entries names of the open directory d.
func (t *tarWalk) names(d *os.File, prefix string, names []string) error {
	for _, n := range names {
		name := prefix + n
		if underAny(joinRel(t.real, name), t.denied) {
			continue // hidden from the session's commands
		}
		var st unix.Stat_t
		if err := unix.Fstatat(int(d.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed meanwhile
		}
		if t.entries++; t.entries > MaxTarEntries {
			return fmt.Errorf("%w: the directory has over %d entries", ErrQuota, MaxTarEntries)
		}
		h := &tar.Header{Name: name, Mode: int64(st.Mode & 0o777), ModTime: time.Unix(st.Mtim.Unix()), Format: tar.FormatPAX}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if t.depth >= MaxTarDepth {
				return fmt.Errorf("%w: the directory is over %d levels deep", ErrQuota, MaxTarDepth)
			}
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
			sub, err := t.open(d, n, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
			if err != nil {
				continue
			}
			err = t.tw.WriteHeader(h)
			if err == nil {
				t.depth++
				err = t.dir(sub, name+"/")
				t.depth--
			}
			sub.Close()
			if err != nil {
				return err
			}
		case unix.S_IFLNK:
			buf := make([]byte, unix.PathMax)
			k, err := unix.Readlinkat(int(d.Fd()), n, buf)
			if err != nil {
				if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
					t.left.add(name, err)
				}
				continue
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, string(buf[:k])
			if err := t.tw.WriteHeader(h); err != nil {
				return err
			}
		case unix.S_IFREG:
			f, err := t.open(d, n, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY)
			if err != nil {
				continue
			}
			err = t.file(f, h)
			f.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// open opens the entry n of d, named name in the archive. One removed
// or swapped for another type meanwhile is left out without a word, as
// if the walk had come later; any other failure is noted.
func (t *tarWalk) open(d *os.File, n, name string, flags int) (*os.File, error) {
	var f *os.File
	var err error
	if testHookTarOpen != nil {
		err = testHookTarOpen(name)
	}
	if err == nil {
		f, err = openAt(d, n, flags)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) {
		t.left.add(name, err)
	}
	return f, err
}

// file writes a regular file, with the size it has when opened.
func (t *tarWalk) file(f *os.File, h *tar.Header) error {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if t.bytes += fi.Size(); t.bytes > MaxTarBytes {
		return fmt.Errorf("%w: the directory holds over %d bytes", ErrQuota, MaxTarBytes)
	}
	h.Typeflag, h.Size = tar.TypeReg, fi.Size()
	if err := t.tw.WriteHeader(h); err != nil {
		return err
	}
	// A file that shrank meanwhile is padded with zeros, one that grew is
	// cut: the header's size holds.
	n, err := io.CopyN(t.tw, f, fi.Size())
	if errors.Is(err, io.EOF) {
		_, err = io.CopyN(t.tw, zeros{}, fi.Size()-n)
	}
	return err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func openAt(d *os.File, name string, flags int) (*os.File, error) {
	fd, err := unix.Openat(int(d.Fd()), name, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// reapWrites removes the entries at the root of the workspace ws that
// writes of a dead daemon left (place), and says how many. ws is opened
// without following a symbolic link, and only names isWriteTemp accepts
// are removed.
func reapWrites(ws string) (int, error) {
	fd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	dir := os.NewFile(uintptr(fd), ws)
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		if isWriteTemp(name) && unix.Unlinkat(fd, name, 0) == nil {
			n++
		}
	}
	return n, nil
}
