package daemon

import (
	"archive/tar"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"
)

// Tar upload and download of a workspace directory (tar_linux.go). An
// upload is checked whole before anything is written: every entry's
// name must stay beneath the directory (no absolute name, no `..`), be
// no protected path, and be a regular file, a directory or a symbolic
// link whose target stays in the workspace; no device, fifo, hard link or
// set-id entry; at most MaxTarEntries entries and MaxTarBytes bytes. Then
// the whole archive is walked again with every link followed, the
// archive's own and the workspace's (checkTarPaths, tarcheck_linux.go):
// where each entry really lands is checked against the protected paths,
// the filesystem and write rules, and each link's target against the
// workspace's bounds. A bad entry refuses the request and nothing is
// written. Then each entry
// lands as WriteFile's do (resolved beneath the root, atomically, owned
// by the workspace's owner), so a failure partway leaves whole files
// only. A download never follows a link: links are entries of their own.

// LeftOut is what a download left out because the daemon could not read
// it: Count entries, the first MaxLeftOutNamed of them named in Paths
// (relative to the directory asked for), each with Why (the error).
type LeftOut struct {
	Count int
	Paths []string
	Why   []string
}

// MaxLeftOutNamed bounds the entries a LeftOut names.
const MaxLeftOutNamed = 100

func (l *LeftOut) add(name string, err error) {
	l.Count++
	if len(l.Paths) < MaxLeftOutNamed {
		l.Paths = append(l.Paths, name)
		l.Why = append(l.Why, errnoText(err))
	}
}

// errnoText is err as the kernel's words, without the call or the path.
func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// MaxTarBytes bounds an uploaded tar and the files it writes (a sparse
// entry counts its whole size), and the files of a downloaded one.
const MaxTarBytes = 256 << 20

// MaxTarEntries bounds the entries of a tar, both ways.
const MaxTarEntries = 10000

// MaxTarDepth bounds how deep a download descends: the walk holds one
// open directory per level, and a chain of directories a command made as
// deep as MaxTarEntries would otherwise hold that many of the daemon's
// file descriptors, which all its sessions share, for one request. An
// upload refuses an entry deeper than that below the workspace's top, so
// that what it writes can be downloaded back.
const MaxTarDepth = 256

// MaxTenantUploads bounds the tar uploads one tenant may have under way at
// once. Each is spooled whole before anything is written (up to
// MaxTarBytes): without a disk quota, in the daemon's state directory,
// outside any workspace, where without a bound one tenant's parallel
// uploads could fill the daemon's disk; under one, in the workspace's
// tmpfs, which the quota counts (spool).
const MaxTenantUploads = 2

// startUpload counts an upload of tenant against MaxTenantUploads, or
// refuses it (ErrQuota) when the tenant has that many under way; the
// returned function ends it.
func (m *Manager) startUpload(tenant string) (done func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.uploads.full(tenant, MaxTenantUploads) {
		return nil, fmt.Errorf("%w: %d archives are being uploaded for this tenant already; send this one when one of them has ended", ErrQuota, MaxTenantUploads)
	}
	m.uploads.add(tenant)
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.uploads.sub(tenant)
	}, nil
}

// TarReport is what an upload wrote.
type TarReport struct {
	Entries int
	Bytes   int64
}

// tarEntry is a checked entry of an upload: its name relative to the
// workspace root.
type tarEntry struct {
	name   string // as the archive has it, for errors
	rel    string
	typ    byte // tar.TypeReg, TypeDir or TypeSymlink
	mode   fs.FileMode
	target string
	size   int64
}

// checkTarEntry checks one header of an upload into dir (clean, relative
// to the root) and returns the entry, or nil for one to skip (the
// directory itself, "./").
func (s *Session) checkTarEntry(dir string, h *tar.Header) (*tarEntry, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: tar entry %q: %s", ErrBadRequest, h.Name, why)
	}
	if strings.HasPrefix(h.Name, "/") {
		return nil, bad("an absolute name")
	}
	if strings.ContainsRune(h.Name, 0) {
		return nil, bad("a NUL byte in its name")
	}
	for _, c := range strings.Split(h.Name, "/") {
		if c == ".." {
			return nil, bad("a \"..\" component")
		}
	}
	// Relative, without "..": clean, it is beneath dir (".//x" is "x";
	// trimming "./" alone left "/x", which sent the check of its
	// directories into an endless recursion, found by a tester).
	name := path.Clean(h.Name)
	if name == "." {
		if h.Typeflag == tar.TypeDir {
			return nil, nil // the directory itself
		}
		return nil, bad("an empty name")
	}
	// The file type bits some archivers put in the mode are ignored; the
	// set-id bits refuse the entry.
	if h.Mode&0o6000 != 0 || h.Mode&^0o177777 != 0 {
		return nil, bad("set-id or unknown mode bits")
	}
	rel := joinRel(dir, name)
	if strings.Count(rel, "/")+1 > MaxTarDepth {
		return nil, fmt.Errorf("%w: tar entry %q is over %d levels below the workspace's top, deeper than a download serves", ErrQuota, h.Name, MaxTarDepth)
	}
	e := &tarEntry{name: h.Name, rel: rel, mode: fs.FileMode(h.Mode).Perm(), size: h.Size}
	switch h.Typeflag {
	case tar.TypeReg:
		e.typ = tar.TypeReg
	case tar.TypeDir:
		e.typ = tar.TypeDir
	case tar.TypeSymlink:
		e.typ, e.target = tar.TypeSymlink, h.Linkname
		if h.Linkname == "" || strings.HasPrefix(h.Linkname, "/") || strings.ContainsRune(h.Linkname, 0) {
			return nil, bad("a link to an absolute or empty target")
		}
		if t := path.Join(path.Dir(rel), h.Linkname); t == ".." || strings.HasPrefix(t, "../") {
			return nil, bad("a link that leads out of the workspace")
		}
	case tar.TypeLink:
		return nil, bad("a hard link (send the file itself)")
	default:
		return nil, bad("a device, fifo or other special file")
	}
	if e.typ != tar.TypeReg {
		e.size = 0
	}
	if s.protected(rel) {
		return nil, fmt.Errorf("%w: tar entry %q: %q is protected: host tools run or read it", ErrProtected, h.Name, rel)
	}
	return e, nil
}
