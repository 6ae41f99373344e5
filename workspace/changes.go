package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/moatbox/moat/internal/overlay"
	"github.com/moatbox/moat/internal/relpath"
)

// ErrPendingApply: an Apply was interrupted; Apply, Recover or Discard
// finishes or rolls it back before anything else reads the workspace.
var ErrPendingApply = errors.New("an interrupted apply is pending (run apply again to finish or roll it back)")

// Kind is what a change does to a path of the real workspace.
type Kind string

const (
	// Added: the path does not exist in the workspace.
	Added Kind = "added"
	// Modified: a file's content (and maybe its mode) or a symlink's
	// target differs.
	Modified Kind = "modified"
	// Deleted: an overlay whiteout hides the workspace's path (for a
	// directory, with everything below it).
	Deleted Kind = "deleted"
	// ModeChanged: same content, different permission bits.
	ModeChanged Kind = "mode"
	// TypeChanged: a file became a directory, a symlink a file, and so on.
	TypeChanged Kind = "type"
	// Replaced: an opaque directory over a workspace directory: what the
	// workspace has below it is hidden. The workspace entries not
	// re-created are listed as Deleted changes of their own, and the
	// re-created ones as Added or Modified.
	Replaced Kind = "replaced"
)

// Type is a file type.
type Type string

const (
	File    Type = "file"
	Dir     Type = "dir"
	Symlink Type = "symlink"
	// Special: a device, fifo or socket. Listed, never applied.
	Special Type = "special"
)

// Change is one difference between the merged view (upper layer over the
// workspace as it is now) and the workspace.
type Change struct {
	// Path is slash-separated and relative to the workspace; "." is its root.
	Path string `json:"path"`
	Kind Kind   `json:"kind"`
	// Type is the type of the new entry (for Deleted: of the removed one).
	Type Type `json:"type"`
	// OldType is the workspace's type, for TypeChanged.
	OldType Type `json:"old_type,omitempty"`
	// Mode and OldMode are permission bits, with a directory's sticky bit
	// (Mode for Deleted: the old ones). OldMode keeps a workspace file's
	// set-ID bits, which Mode never has: a change shows that apply drops
	// them.
	Mode    fs.FileMode `json:"mode"`
	OldMode fs.FileMode `json:"old_mode,omitempty"`
	// Size and OldSize are byte sizes of files.
	Size    int64 `json:"size,omitempty"`
	OldSize int64 `json:"old_size,omitempty"`
	// Target and OldTarget are symlink targets.
	Target    string `json:"target,omitempty"`
	OldTarget string `json:"old_target,omitempty"`
	// Binary: either side holds a NUL byte or invalid UTF-8 in its first 8 KiB.
	Binary bool `json:"binary,omitempty"`
	// Count is, for a Deleted directory, the number of non-directories
	// below it; for a Collapsed entry, the number of changes it stands for.
	Count int `json:"count,omitempty"`
	// Collapsed: a summary entry standing for the changes below Path that
	// are not listed on their own (see Filter.Collapse). Never produced
	// by Changes.
	Collapsed bool `json:"collapsed,omitempty"`
	// Outside: a symlink whose target is absolute, or climbs out of the
	// workspace (following the merged view's symlinks on the way).
	Outside bool `json:"outside,omitempty"`
	// SetID: the file has the set-user-ID or set-group-ID bit. Mode holds
	// the permission bits only, so Apply does not carry it over.
	SetID bool `json:"setid,omitempty"`
	// Shadows is, for Python bytecode, the source file (workspace
	// relative) that Python loads it in place of.
	Shadows string `json:"shadows,omitempty"`
	// Startup is, for a file of a site directory's module that one of
	// its .pth files imports (or otherwise names in an import line, which
	// Python runs at every start), that .pth file.
	Startup string `json:"startup,omitempty"`
	// Deep: a directory whose tree goes deeper than a path can name (see
	// maxTreePath): what is below it is not listed, and apply refuses it
	// (ErrTooDeep). Its Kind is Added for a new directory, Modified for
	// one of the workspace.
	Deep bool `json:"deep,omitempty"`
}

// maxTreePath bounds the host paths the walk reads: a path longer than
// PATH_MAX cannot be named to the kernel, nor applied to the workspace.
// A directory deeper than that, less room for one more name, is listed
// as Deep and not read: a command that nests directories without end
// made every review and apply of its change set fail, its other changes
// with them (found by a tester).
const maxTreePath = 4095 - 256

// ErrTooDeep is an apply of a Deep change.
var ErrTooDeep = errors.New("too deep to apply")

// Changes walks the upper layer and lists what it changes in the
// workspace, parents before children, sorted by path. A copied-up file
// whose content and mode equal the workspace's is no change (a command
// that only touched it, or a change already applied). Lower entries
// hidden by an opaque directory are listed as Deleted.
func (c *ChangeSet) Changes() ([]Change, error) {
	if _, err := os.Lstat(c.journalPath()); err == nil {
		return nil, fmt.Errorf("changes of %s: %w", c.meta.ID, ErrPendingApply)
	}
	if err := c.CheckComplete(); err != nil {
		return nil, err
	}
	// What another directory at the workspace's path holds says nothing
	// of what the commands changed.
	if err := c.checkWorkspaceDir("changes of"); err != nil {
		return nil, err
	}
	w := walker{upper: resolvedRoot(c.UpperDir()), lower: resolvedRoot(c.meta.Workspace), copy: c.meta.Copy}
	if err := w.root(); err != nil {
		return nil, err
	}
	// A copy hides nothing, but what it lacks was deleted: it is read as
	// one opaque directory, without Replaced entries.
	if err := w.dir("", c.meta.Copy, true); err != nil {
		return nil, err
	}
	return w.out, nil
}

type walker struct {
	upper, lower string
	copy         bool
	out          []Change
	pth          map[string]map[string]string // by site directory: names its .pth files' import lines hold, each to its .pth
}

func (w *walker) root() error {
	ufi, err := os.Lstat(w.upper)
	if err != nil {
		return fmt.Errorf("changes: %w", err)
	}
	lfi, err := os.Lstat(w.lower)
	if err != nil {
		return fmt.Errorf("changes: workspace: %w", err)
	}
	if modeOf(ufi) != modeOf(lfi) {
		w.out = append(w.out, Change{Path: ".", Kind: ModeChanged, Type: Dir, Mode: modeOf(ufi), OldMode: modeOf(lfi)})
	}
	return nil
}

func (w *walker) upperPath(rel string) string { return filepath.Join(w.upper, filepath.FromSlash(rel)) }
func (w *walker) lowerPath(rel string) string { return filepath.Join(w.lower, filepath.FromSlash(rel)) }

// dir lists the changes below rel; opaque says that the workspace's
// entries below rel are hidden from the merged view, and lowerDir that the
// workspace has a directory at rel, reached with no symlink on the way.
// Without one nothing of the workspace is below rel: a symlink there
// (which the upper directory replaced) is never followed, since it may
// lead out of the workspace, to files the command could not read.
func (w *walker) dir(rel string, opaque, lowerDir bool) error {
	entries, err := readDirNames(w.upperPath(rel))
	if err != nil {
		return fmt.Errorf("changes: %w", err)
	}
	inUpper := make(map[string]bool, len(entries))
	for _, name := range entries {
		inUpper[name] = true
	}
	if opaque && lowerDir {
		lowerNames, err := readDirNames(w.lowerPath(rel))
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errNotDir) {
			return fmt.Errorf("changes: %w", err)
		}
		for _, name := range lowerNames {
			if !inUpper[name] {
				entries = append(entries, name)
			}
		}
		sort.Strings(entries)
	}
	for _, name := range entries {
		p := path.Join(rel, name)
		if !inUpper[name] {
			if err := w.deleted(p); err != nil {
				return err
			}
			continue
		}
		if err := w.entry(p, opaque, lowerDir); err != nil {
			return err
		}
	}
	return nil
}

var errNotDir = errors.New("not a directory")

// hidesLower reports whether the opaque upper directory up hides an entry
// of the workspace directory low.
func hidesLower(up, low string) (bool, error) {
	u, err := readDirNames(up)
	if err != nil {
		return false, fmt.Errorf("changes: %w", err)
	}
	l, err := readDirNames(low)
	if err != nil {
		return false, fmt.Errorf("changes: %w", err)
	}
	in := make(map[string]bool, len(u))
	for _, name := range u {
		in[name] = true
	}
	for _, name := range l {
		if !in[name] {
			return true, nil
		}
	}
	return false, nil
}

// errChangedUnderReview: an entry of the change set is no longer what the
// review's walk saw (a link or a FIFO where a file was): a command still
// running in it changed it.
var errChangedUnderReview = errors.New("changed while being reviewed (a symbolic link or a special file where a file or directory was): review it once nothing runs in it")

// resolvedRoot is dir with the links on its way resolved: the review
// opens what lies below a root with no link on its path (openReview),
// and the state directory or the workspace may be reached through one.
func resolvedRoot(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return dir
}

func readDirNames(dir string) ([]string, error) {
	f, err := openReview(dir, true)
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, errNotDir
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, errNotDir
	}
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// modeOf is the mode a change carries for fi: its permission bits and,
// for a directory, the sticky bit (a shared directory such as a tmp/
// keeps it through review and apply). Set-ID bits are never carried (see
// Change.SetID).
func modeOf(fi fs.FileInfo) fs.FileMode {
	m := fi.Mode().Perm()
	if fi.IsDir() {
		m |= fi.Mode() & fs.ModeSticky
	}
	return m
}

// setIDOf is a regular file's set-user-ID and set-group-ID bits.
func setIDOf(fi fs.FileInfo) fs.FileMode {
	if !fi.Mode().IsRegular() {
		return 0
	}
	return fi.Mode() & (fs.ModeSetuid | fs.ModeSetgid)
}

// Octal is m as chmod(1) writes it: 0755, 1777 for a sticky directory,
// 4755 for a set-user-ID file.
func Octal(m fs.FileMode) string {
	n := uint32(m.Perm())
	if m&fs.ModeSticky != 0 {
		n |= 0o1000
	}
	if m&fs.ModeSetuid != 0 {
		n |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		n |= 0o2000
	}
	return fmt.Sprintf("%04o", n)
}

func typeOf(fi fs.FileInfo) Type {
	switch {
	case fi.Mode().IsRegular():
		return File
	case fi.IsDir():
		return Dir
	case fi.Mode()&fs.ModeSymlink != 0:
		return Symlink
	}
	return Special
}

// entry lists the changes at p and below; lowerParent is dir's lowerDir
// for p's parent.
func (w *walker) entry(p string, opaqueAbove, lowerParent bool) error {
	up := w.upperPath(p)
	ufi, err := os.Lstat(up)
	if err != nil {
		return fmt.Errorf("changes: %w", err)
	}
	if err := checkOverlayFeatures(up, ufi); err != nil {
		return err
	}
	var lfi fs.FileInfo
	if lowerParent {
		lfi, err = os.Lstat(w.lowerPath(p))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			lfi = nil
		} else if err != nil {
			return fmt.Errorf("changes: %w", err)
		}
	}
	if overlay.IsWhiteout(ufi) {
		if lfi != nil {
			return w.deleted(p)
		}
		return nil
	}
	ch := Change{Path: p, Type: typeOf(ufi), Mode: modeOf(ufi)}
	if lfi != nil {
		ch.OldMode = modeOf(lfi) | setIDOf(lfi)
	}
	switch {
	case lfi == nil:
		ch.Kind = Added
	case typeOf(lfi) != ch.Type:
		ch.Kind = TypeChanged
		ch.OldType = typeOf(lfi)
	}
	switch ch.Type {
	case Dir:
		opaque := opaqueAbove
		if !opaque {
			if opaque, err = isOpaque(up); err != nil {
				return err
			}
		}
		if ch.Kind == "" {
			hides := false
			if opaque && !w.copy {
				if hides, err = hidesLower(up, w.lowerPath(p)); err != nil {
					return err
				}
			}
			switch {
			case hides:
				ch.Kind = Replaced
			case ch.Mode != ch.OldMode:
				ch.Kind = ModeChanged
			}
		}
		if len(up) > maxTreePath || len(w.lowerPath(p)) > maxTreePath {
			ch.Deep = true
			if ch.Kind == "" {
				ch.Kind = Modified
			}
			w.out = append(w.out, ch)
			return nil
		}
		if ch.Kind != "" {
			w.out = append(w.out, ch)
		}
		return w.dir(p, opaque, lfi != nil && lfi.IsDir())
	case Symlink:
		if ch.Target, err = os.Readlink(up); err != nil {
			return fmt.Errorf("changes: %w", err)
		}
		ch.Outside = w.escapes(p, ch.Target)
		if ch.Kind == "" {
			if ch.OldTarget, err = os.Readlink(w.lowerPath(p)); err != nil {
				return fmt.Errorf("changes: %w", err)
			}
			if ch.OldTarget == ch.Target {
				return nil
			}
			ch.Kind = Modified
		}
	case File:
		ch.Size = ufi.Size()
		ch.SetID = ufi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0
		ch.Shadows = w.shadows(p)
		ch.Startup = w.startup(p)
		if ch.Kind == "" {
			ch.OldSize = lfi.Size()
			same, err := sameContent(up, w.lowerPath(p), ufi.Size(), lfi.Size())
			if err != nil {
				return err
			}
			switch {
			case !same:
				ch.Kind = Modified
			case ch.Mode|setIDOf(ufi) != ch.OldMode:
				// A copy-up keeps the set-ID bits: a file whose times
				// alone changed is no change. One that lost them (chmod
				// u-s) is a change of mode.
				ch.Kind = ModeChanged
			default:
				return nil
			}
		}
		if ch.Kind != ModeChanged {
			bin, err := isBinaryFile(up)
			if err != nil {
				return err
			}
			if !bin && ch.Kind == Modified {
				bin, err = isBinaryFile(w.lowerPath(p))
				if err != nil {
					return err
				}
			}
			ch.Binary = bin
		}
	}
	w.out = append(w.out, ch)
	return nil
}

// lstatMerged is the status of rel in the merged view (the upper layer
// over the workspace, whiteouts and opaque directories applied) and the
// host path it is read from, or nil when rel does not exist there. A
// symlink on the way is not followed: rel does not exist through it.
func (w *walker) lstatMerged(rel string) (fs.FileInfo, string) {
	lowerVisible := !w.copy
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		last := i == len(parts)-1
		if fi, err := os.Lstat(w.upperPath(p)); err == nil {
			switch {
			case overlay.IsWhiteout(fi):
				return nil, ""
			case last:
				return fi, w.upperPath(p)
			case !fi.IsDir():
				return nil, ""
			}
			if opaque, _ := isOpaque(w.upperPath(p)); opaque {
				lowerVisible = false
			}
			// Nor is what a workspace symlink here leads to.
			if lowerVisible {
				if lfi, err := os.Lstat(w.lowerPath(p)); err != nil || !lfi.IsDir() {
					lowerVisible = false
				}
			}
			continue
		}
		if !lowerVisible {
			return nil, ""
		}
		fi, err := os.Lstat(w.lowerPath(p))
		switch {
		case err != nil:
			return nil, ""
		case last:
			return fi, w.lowerPath(p)
		case !fi.IsDir():
			return nil, ""
		}
	}
	return nil, ""
}

// escapes reports whether the symlink at rel pointing to target leads
// out of the workspace: an absolute target, or ".." past the root once
// the merged view's symlinks on the way are followed (relpath's walk). An
// absolute target counts even when it names a path in the workspace:
// what it reaches depends on where the workspace sits, so a reviewer must
// look at it. A loop resolves to nothing, so it escapes nowhere.
func (w *walker) escapes(rel, target string) bool {
	if path.IsAbs(target) {
		return true
	}
	_, err := relpath.Resolve(path.Dir(rel), target, func(p string, _ bool) (string, bool, error) {
		fi, host := w.lstatMerged(p)
		if fi == nil || fi.Mode()&fs.ModeSymlink == 0 {
			return "", false, nil
		}
		t, err := os.Readlink(host)
		return t, err == nil, err
	})
	return errors.Is(err, relpath.ErrOut)
}

// shadows returns the source file that Python loads the bytecode file p
// in place of: for __pycache__/X.<tag>.pyc, X.py beside __pycache__ (if
// it exists; without it Python never reads the file); for a .pyc
// elsewhere, X.py beside it, which Python 2 reads it for. Python 3 also
// imports such a file when no X.py exists: Notice flags it either way.
func (w *walker) shadows(p string) string {
	if !strings.HasSuffix(p, ".pyc") {
		return ""
	}
	dir, name := path.Split(p)
	src := path.Join(dir, strings.TrimSuffix(name, ".pyc")+".py")
	if path.Base(dir) == "__pycache__" {
		mod, _, _ := strings.Cut(name, ".")
		src = path.Join(path.Dir(path.Clean(dir)), mod+".py")
	}
	if fi, _ := w.lstatMerged(src); fi == nil {
		return ""
	}
	return src
}

// startup returns the .pth file whose import lines name the module p
// belongs to, in the site directory above p: Python runs those lines at
// every start, so an edit of what they import runs then too (a tester's
// line in _distutils_hack, which setuptools' .pth imports, ran on the
// host after a review that folded it away). Each site directory's .pth
// files are read once, in the merged view; a name is any identifier of
// an import line, a module's or not, which errs towards listing.
func (w *walker) startup(p string) string {
	parts := strings.Split(p, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] != "site-packages" && parts[i] != "dist-packages" {
			continue
		}
		site := strings.Join(parts[:i+1], "/")
		mod, _, _ := strings.Cut(parts[i+1], ".")
		if strings.HasSuffix(parts[i+1], ".pth") && i+2 == len(parts) {
			return "" // the .pth itself, which Notice names
		}
		if w.pth == nil {
			w.pth = map[string]map[string]string{}
		}
		names, ok := w.pth[site]
		if !ok {
			names = w.pthNames(site)
			w.pth[site] = names
		}
		if pth, ok := names[mod]; ok {
			return pth
		}
	}
	return ""
}

// pthNames reads the .pth files of the site directory site (merged view)
// and returns each identifier of their import lines, to the file's path.
func (w *walker) pthNames(site string) map[string]string {
	names := map[string]string{}
	seen := map[string]bool{}
	for _, dir := range []string{w.upperPath(site), w.lowerPath(site)} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".pth") || seen[name] {
				continue
			}
			seen[name] = true
			rel := site + "/" + name
			fi, host := w.lstatMerged(rel)
			if fi == nil || !fi.Mode().IsRegular() {
				continue
			}
			f, err := openReview(host, false)
			if err != nil {
				continue
			}
			data, _ := io.ReadAll(io.LimitReader(f, 1<<20))
			f.Close()
			for _, line := range strings.Split(string(data), "\n") {
				if !strings.HasPrefix(line, "import ") && !strings.HasPrefix(line, "import\t") {
					continue
				}
				for _, id := range strings.FieldsFunc(line, func(r rune) bool {
					return r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r)
				}) {
					if _, ok := names[id]; !ok {
						names[id] = rel
					}
				}
			}
		}
	}
	return names
}

// deleted records the removal of the workspace's path p.
func (w *walker) deleted(p string) error {
	lfi, err := os.Lstat(w.lowerPath(p))
	if err != nil {
		return fmt.Errorf("changes: %w", err)
	}
	if w.copy && typeOf(lfi) == Special {
		return nil // never copied (see copyTree), so not deleted either
	}
	ch := Change{Path: p, Kind: Deleted, Type: typeOf(lfi), Mode: modeOf(lfi), Size: lfi.Size()}
	switch ch.Type {
	case Dir:
		ch.Size = 0
		err = filepath.WalkDir(w.lowerPath(p), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				ch.Count++
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("changes: %w", err)
		}
	case Symlink:
		ch.Size = 0
		if ch.Target, err = os.Readlink(w.lowerPath(p)); err != nil {
			return fmt.Errorf("changes: %w", err)
		}
	case File:
		if ch.Binary, err = isBinaryFile(w.lowerPath(p)); err != nil {
			return err
		}
	}
	w.out = append(w.out, ch)
	return nil
}

// sameContent compares two files byte by byte.
func sameContent(a, b string, asize, bsize int64) (bool, error) {
	if asize != bsize {
		return false, nil
	}
	fa, err := openReview(a, false)
	if err != nil {
		return false, fmt.Errorf("changes: %w", err)
	}
	defer fa.Close()
	fb, err := openReview(b, false)
	if err != nil {
		return false, fmt.Errorf("changes: %w", err)
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if ea == io.EOF || ea == io.ErrUnexpectedEOF {
			return eb == ea, nil
		}
		if ea != nil {
			return false, fmt.Errorf("changes: %w", ea)
		}
		if eb != nil {
			return false, fmt.Errorf("changes: %w", eb)
		}
	}
}

// sniffLen is how much of a file binary detection reads, as git does.
const sniffLen = 8 << 10

func isBinaryFile(p string) (bool, error) {
	f, err := openReview(p, false)
	if err != nil {
		return false, fmt.Errorf("changes: %w", err)
	}
	defer f.Close()
	buf := make([]byte, sniffLen)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return false, fmt.Errorf("changes: %w", err)
	}
	return isBinary(buf[:n], n == sniffLen), nil
}

// isBinary: a NUL byte, or invalid UTF-8 (a multi-byte sequence cut by the
// end of a truncated sample does not count).
func isBinary(b []byte, truncated bool) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	if truncated {
		for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
			if r, _ := utf8.DecodeLastRune(b); r != utf8.RuneError {
				break
			}
			b = b[:len(b)-1]
		}
	}
	return !utf8.Valid(b)
}

// DefaultCollapse are the directory names whose changes are summarised as
// one entry by default.
var DefaultCollapse = []string{"node_modules", "__pycache__", ".venv"}

// Filter selects and summarises changes for review.
type Filter struct {
	// Exclude drops changes whose path matches one of these globs (path.Match
	// syntax). A pattern without "/" matches a name at any depth; one with
	// "/" matches from the workspace root; either also drops everything
	// below a matching directory. A trailing "/" matches directories only.
	Exclude []string
	// Collapse names directories (same pattern rules) whose changes are
	// replaced by one Collapsed entry with a Count. Nil means
	// DefaultCollapse; an empty non-nil slice collapses nothing. A change
	// with a Notice, and any symlink not deleted, is never collapsed: it
	// is listed on its own after the entry of its directory.
	Collapse []string
}

// Excluded says how many of changes f's Exclude leaves out, and how many
// of those a reviewer should have looked at (Notice).
func (f Filter) Excluded(changes []Change) (n, notices int) {
	for _, ch := range changes {
		if matchAny(f.Exclude, ch.Path, ch.Type == Dir) != "" {
			n++
			if Notice(ch) != "" {
				notices++
			}
		}
	}
	return n, notices
}

// ExcludedNote is what a review that excluded n changes, notices of them
// with a Notice, says of them, "" for none: they are not shown, and an
// apply that names no paths applies them all the same.
func ExcludedNote(n, notices int) string {
	if n == 0 {
		return ""
	}
	s := plural(n, "change") + " left out by exclusion, not shown"
	if notices > 0 {
		s += fmt.Sprintf(" (%d of them to look at: a link out of the workspace, a set-ID file or a file that runs)", notices)
	}
	return s + "; an apply that names no paths applies them too"
}

// Select returns the changes f keeps, in order.
func (f Filter) Select(changes []Change) []Change {
	collapse := f.Collapse
	if collapse == nil {
		collapse = DefaultCollapse
	}
	var out []Change
	type fold struct {
		i      int     // index in out
		own    *Change // the directory's own change, if any
		hidden int     // changes it stands for
	}
	folds := map[string]*fold{}
	for _, ch := range changes {
		if matchAny(f.Exclude, ch.Path, ch.Type == Dir) != "" {
			continue
		}
		key := matchAny(collapse, ch.Path, ch.Type == Dir)
		if key == "" || mustList(ch) {
			out = append(out, ch)
			continue
		}
		g := folds[key]
		if g == nil {
			g = &fold{i: len(out)}
			folds[key] = g
			out = append(out, Change{Path: key, Kind: Modified, Type: Dir, Collapsed: true})
		}
		if ch.Path == key {
			own := ch
			g.own = &own
			out[g.i].Kind, out[g.i].Mode = ch.Kind, ch.Mode
			if ch.Kind == Deleted {
				out[g.i].Count += ch.Count
			}
			continue
		}
		g.hidden++
		n := 1
		if ch.Kind == Deleted && ch.Type == Dir {
			n = ch.Count
		}
		if ch.Type != Dir || ch.Kind == Deleted {
			out[g.i].Count += n
		}
	}
	// A fold that hides nothing (everything below it is listed, or it is
	// a lone entry that merely has the name) is shown as what it is.
	drop := map[int]bool{}
	for _, g := range folds {
		switch {
		case g.hidden > 0:
		case g.own != nil:
			out[g.i] = *g.own
		default:
			drop[g.i] = true
		}
	}
	if len(drop) == 0 {
		return out
	}
	kept := out[:0]
	for i, ch := range out {
		if !drop[i] {
			kept = append(kept, ch)
		}
	}
	return kept
}

// mustList: a change a fold never hides, because what it adds can run
// or lead somewhere else later, after the review.
func mustList(ch Change) bool {
	return ch.Kind != Deleted && (ch.Type == Symlink || Notice(ch) != "")
}

// Notice says why a reviewer should look at a change even where its
// directory is summarised: a symlink leading out of the workspace, a
// set-ID file, a file that runs (executable, Python bytecode loaded in
// place of a source or importable as a module, native code such as an
// extension module, what Python runs or reads at start-up: a .pth file,
// a module one imports, a sitecustomize module or package, pyvenv.cfg, a
// ._pth file). "" for none; for a deletion always "".
func Notice(ch Change) string {
	if ch.Kind == Deleted {
		return ""
	}
	var notes []string
	if ch.Deep {
		notes = append(notes, "WARNING: its tree goes deeper than moat reads (paths over 4095 bytes): not listed, and not applied")
	}
	switch ch.Type {
	case Symlink:
		if ch.Outside {
			notes = append(notes, "WARNING: the target is outside the workspace")
		}
	case File:
		dir, name := path.Split(ch.Path)
		site := path.Base(dir) == "site-packages" || path.Base(dir) == "dist-packages"
		switch {
		case ch.Shadows != "":
			notes = append(notes, "bytecode Python loads in place of "+QuoteName(ch.Shadows))
		case ch.Startup != "":
			notes = append(notes, "Python runs it at start-up: "+QuoteName(ch.Startup)+" imports it")
		case name == "pyvenv.cfg":
			notes = append(notes, "Python reads it at start-up: its home says where the standard library is")
		case strings.HasSuffix(name, "._pth"):
			notes = append(notes, "Python reads it at start-up in place of its module search path")
		case strings.HasSuffix(name, ".pyc") && path.Base(dir) != "__pycache__":
			notes = append(notes, "bytecode Python imports as a module")
		case site && strings.HasSuffix(name, ".pth"),
			// Anywhere: Python imports them from every directory on its
			// path, which a .pth's path lines extend (an editable
			// install's checkout in .venv/src; found by a tester).
			pythonModule(name, "sitecustomize"), pythonModule(name, "usercustomize"),
			inStartupPackage(dir):
			notes = append(notes, "Python runs it at start-up")
		case path.Base(dir) == "bin" && (name == "activate" || strings.HasPrefix(name, "activate.") || name == "Activate.ps1"):
			notes = append(notes, "a shell sources it, activating a virtual environment")
		case nativeCode(name):
			// Python imports X.so (X.abi3.so, X.cpython-…so) before
			// X.py, and runs its initialiser on import.
			notes = append(notes, "native code: Python and Node import it as a module, programs load it")
		}
		if ch.Mode&0o111 != 0 {
			notes = append(notes, "executable")
		}
		if ch.SetID {
			notes = append(notes, "WARNING: set-ID bit, which apply drops")
		}
	}
	if (ch.Type == File || ch.Type == Dir) && ch.Mode&0o002 != 0 && ch.Mode&fs.ModeSticky == 0 {
		// Applied as it is, owned by the workspace's owner: any user of
		// the host could then change what that owner runs.
		notes = append(notes, "WARNING: anyone may write it")
	}
	return strings.Join(notes, ", ")
}

// inStartupPackage says whether the directory dir ("a/b/", as path.Split
// leaves it) is, or is within, a sitecustomize or usercustomize package:
// Python imports the package at start-up, as it does the module, from
// any directory on its path, and the package's files are what it runs.
func inStartupPackage(dir string) bool {
	for _, part := range strings.Split(strings.TrimSuffix(dir, "/"), "/") {
		if part == "sitecustomize" || part == "usercustomize" {
			return true
		}
	}
	return false
}

// pythonModule says whether the file name is one Python imports as the
// module mod: mod.py, its bytecode, or an extension module (mod.so,
// mod.abi3.so, mod.cpython-312-x86_64-linux-gnu.so, mod.pyd).
func pythonModule(name, mod string) bool {
	rest, ok := strings.CutPrefix(name, mod+".")
	if !ok {
		return false
	}
	return rest == "py" || rest == "pyc" || nativeCode(name)
}

// nativeCode says whether the file name is a shared library's: a Python
// extension module among them.
func nativeCode(name string) bool {
	for _, ext := range []string{".so", ".pyd", ".dylib", ".node", ".dll"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return strings.Contains(name, ".so.")
}

// matchAny returns the path (p or an ancestor of p) that one of the
// patterns matches, or "". Its work grows with p's depth, not with the
// square of it: a change set can nest directories thousands deep.
func matchAny(patterns []string, p string, isDir bool) string {
	for _, pat := range patterns {
		dirOnly := strings.HasSuffix(pat, "/")
		pat = strings.TrimSuffix(pat, "/")
		anchored := strings.Contains(pat, "/")
		pat = strings.TrimPrefix(pat, "/")
		// An anchored pattern matches a prefix with at most as many
		// slashes as it has, plus one per character class (which
		// path.Match lets match a slash): deeper prefixes cannot match.
		maxSlashes := strings.Count(pat, "/") + strings.Count(pat, "[")
		for start, slashes := 0, 0; ; slashes++ {
			end := strings.IndexByte(p[start:], '/')
			last := end < 0
			if last {
				end = len(p)
			} else {
				end += start
			}
			if dirOnly && last && !isDir {
				break
			}
			subject := p[start:end]
			if anchored {
				subject = p[:end]
			}
			if ok, _ := path.Match(pat, subject); ok {
				return p[:end]
			}
			if last || anchored && slashes >= maxSlashes {
				break
			}
			start = end + 1
		}
	}
	return ""
}
