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
	"unicode/utf8"
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
	// Mode and OldMode are permission bits (Mode for Deleted: the old ones).
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
	// Collapsed: a summary entry standing for every change below Path
	// (see Filter.Collapse). Never produced by Changes.
	Collapsed bool `json:"collapsed,omitempty"`
}

// Changes walks the upper layer and lists what it changes in the
// workspace, parents before children, sorted by path. A copied-up file
// whose content and mode equal the workspace's is no change (a command
// that only touched it, or a change already applied). Lower entries
// hidden by an opaque directory are listed as Deleted.
func (c *ChangeSet) Changes() ([]Change, error) {
	if _, err := os.Lstat(c.journalPath()); err == nil {
		return nil, fmt.Errorf("changes of %s: %w", c.meta.ID, ErrPendingApply)
	}
	w := walker{upper: c.UpperDir(), lower: c.meta.Workspace, copy: c.meta.Copy}
	if err := w.root(); err != nil {
		return nil, err
	}
	// A copy hides nothing, but what it lacks was deleted: it is read as
	// one opaque directory, without Replaced entries.
	if err := w.dir("", c.meta.Copy); err != nil {
		return nil, err
	}
	return w.out, nil
}

type walker struct {
	upper, lower string
	copy         bool
	out          []Change
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
	if ufi.Mode().Perm() != lfi.Mode().Perm() {
		w.out = append(w.out, Change{Path: ".", Kind: ModeChanged, Type: Dir, Mode: ufi.Mode().Perm(), OldMode: lfi.Mode().Perm()})
	}
	return nil
}

func (w *walker) upperPath(rel string) string { return filepath.Join(w.upper, filepath.FromSlash(rel)) }
func (w *walker) lowerPath(rel string) string { return filepath.Join(w.lower, filepath.FromSlash(rel)) }

// dir lists the changes below rel; opaque says that the workspace's
// entries below rel are hidden from the merged view.
func (w *walker) dir(rel string, opaque bool) error {
	entries, err := readDirNames(w.upperPath(rel))
	if err != nil {
		return fmt.Errorf("changes: %w", err)
	}
	inUpper := make(map[string]bool, len(entries))
	for _, name := range entries {
		inUpper[name] = true
	}
	if opaque {
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
		if err := w.entry(p, opaque); err != nil {
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

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
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

func (w *walker) entry(p string, opaqueAbove bool) error {
	up := w.upperPath(p)
	ufi, err := os.Lstat(up)
	if err != nil {
		return fmt.Errorf("changes: %w", err)
	}
	if err := checkOverlayFeatures(up, ufi); err != nil {
		return err
	}
	lfi, err := os.Lstat(w.lowerPath(p))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		lfi = nil
	} else if err != nil {
		return fmt.Errorf("changes: %w", err)
	}
	if isWhiteout(ufi) {
		if lfi != nil {
			return w.deleted(p)
		}
		return nil
	}
	ch := Change{Path: p, Type: typeOf(ufi), Mode: ufi.Mode().Perm()}
	if lfi != nil {
		ch.OldMode = lfi.Mode().Perm()
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
		if ch.Kind != "" {
			w.out = append(w.out, ch)
		}
		return w.dir(p, opaque)
	case Symlink:
		if ch.Target, err = os.Readlink(up); err != nil {
			return fmt.Errorf("changes: %w", err)
		}
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
		if ch.Kind == "" {
			ch.OldSize = lfi.Size()
			same, err := sameContent(up, w.lowerPath(p), ufi.Size(), lfi.Size())
			if err != nil {
				return err
			}
			switch {
			case !same:
				ch.Kind = Modified
			case ch.Mode != ch.OldMode:
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

// deleted records the removal of the workspace's path p.
func (w *walker) deleted(p string) error {
	lfi, err := os.Lstat(w.lowerPath(p))
	if err != nil {
		return fmt.Errorf("changes: %w", err)
	}
	ch := Change{Path: p, Kind: Deleted, Type: typeOf(lfi), Mode: lfi.Mode().Perm(), Size: lfi.Size()}
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
	fa, err := os.Open(a)
	if err != nil {
		return false, fmt.Errorf("changes: %w", err)
	}
	defer fa.Close()
	fb, err := os.Open(b)
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
	f, err := os.Open(p)
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
	// DefaultCollapse; an empty non-nil slice collapses nothing.
	Collapse []string
}

// Select returns the changes f keeps, in order.
func (f Filter) Select(changes []Change) []Change {
	collapse := f.Collapse
	if collapse == nil {
		collapse = DefaultCollapse
	}
	var out []Change
	group := map[string]int{} // collapsed path -> index in out
	for _, ch := range changes {
		if matchAny(f.Exclude, ch.Path, ch.Type == Dir) != "" {
			continue
		}
		key := matchAny(collapse, ch.Path, ch.Type == Dir)
		if key == "" {
			out = append(out, ch)
			continue
		}
		i, ok := group[key]
		if !ok {
			i = len(out)
			group[key] = i
			out = append(out, Change{Path: key, Kind: Modified, Type: Dir, Collapsed: true})
		}
		if ch.Path == key {
			out[i].Kind, out[i].Mode = ch.Kind, ch.Mode
			if ch.Kind == Deleted {
				out[i].Count += ch.Count
			}
			continue
		}
		n := 1
		if ch.Kind == Deleted && ch.Type == Dir {
			n = ch.Count
		}
		if ch.Type != Dir || ch.Kind == Deleted {
			out[i].Count += n
		}
	}
	return out
}

// matchAny returns the path (p or an ancestor of p) that one of the
// patterns matches, or "".
func matchAny(patterns []string, p string, isDir bool) string {
	for _, pat := range patterns {
		dirOnly := strings.HasSuffix(pat, "/")
		pat = strings.TrimSuffix(pat, "/")
		anchored := strings.Contains(pat, "/")
		pat = strings.TrimPrefix(pat, "/")
		parts := strings.Split(p, "/")
		for i := range parts {
			prefix := strings.Join(parts[:i+1], "/")
			if dirOnly && i == len(parts)-1 && !isDir {
				break
			}
			subject := parts[i]
			if anchored {
				subject = prefix
			}
			if ok, _ := path.Match(pat, subject); ok {
				return prefix
			}
		}
	}
	return ""
}
