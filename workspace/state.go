package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/overlay"
)

// Sentinel errors; callers test them with errors.Is.
var (
	// ErrNotFound: no change set has that ID or session name.
	ErrNotFound = errors.New("no such change set")
	// ErrExists: Create was given a session name already in use.
	ErrExists = errors.New("session already exists")
	// ErrBusy: another process holds the change set (a run, an apply).
	ErrBusy = errors.New("change set is in use")
	// ErrConflict: Apply refused because real files changed since Create.
	ErrConflict = errors.New("workspace changed on the host")
	// ErrReplaced: Apply refused because the workspace's path no longer
	// leads to the directory the change set was made of (a symbolic link,
	// a file, another directory moved or mounted there).
	ErrReplaced = errors.New("the workspace is not the directory the change set was made of")
	// ErrProtected: Apply refused changes to paths that host tools execute
	// or read as configuration, which only a person's --force applies.
	ErrProtected = errors.New("changes to protected paths")
	// ErrUnsupportedLayer: the upper layer uses an overlay feature moat
	// does not mount with, so its meaning cannot be read safely.
	ErrUnsupportedLayer = errors.New("unsupported overlay upper layer")
	// ErrIncomplete: the change set's copy of the workspace (CreateCopy)
	// never finished, or a run's changes were being merged into it (see
	// overlay.MergeXattr) and the merge did not finish: what its upper
	// directory lacks or holds half-written says nothing of what a
	// command did, so it can only be discarded.
	ErrIncomplete = errors.New("incomplete change set: it can only be discarded")
	// ErrCopyTooLarge: CreateCopy was given a bound and the workspace's
	// files are over it.
	ErrCopyTooLarge = errors.New("workspace too large to copy")
	// ErrStaleReview: the change set's last review (NoteReview) was of a
	// change set a run or session held, which may have changed it since,
	// or a run was recorded in it after the review: Apply refuses until
	// it is reviewed again.
	ErrStaleReview = errors.New("stale review")
)

// StateDir is where moat keeps change sets: $MOAT_STATE_DIR when set (tests
// and CI), /var/lib/moat for root, else $XDG_STATE_HOME/moat or
// ~/.local/state/moat.
//
// A directory that another user owns or can write, or that sits in one
// (ErrStateDirUnsafe), is refused: see checkStateDir.
func StateDir() (string, error) {
	d, err := stateDirPath()
	if err != nil {
		return "", err
	}
	if err := checkStateDir(d); err != nil {
		return "", err
	}
	return d, nil
}

func stateDirPath() (string, error) {
	if d := os.Getenv("MOAT_STATE_DIR"); d != "" {
		if !filepath.IsAbs(d) {
			return "", fmt.Errorf("MOAT_STATE_DIR %q is not absolute", d)
		}
		return filepath.Clean(d), nil
	}
	if os.Geteuid() == 0 {
		return "/var/lib/moat", nil
	}
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "moat"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "moat"), nil
}

// Store is a state directory. The zero value is not usable; the package
// functions Create, Open and List use the Store at StateDir().
type Store struct {
	// Dir holds runs/<id>/ for every change set.
	Dir string
}

// DefaultStore returns the Store at StateDir().
func DefaultStore() (*Store, error) {
	d, err := StateDir()
	if err != nil {
		return nil, err
	}
	return &Store{Dir: d}, nil
}

// Create starts a change set of the default Store; see Store.Create.
func Create(ws, session string) (*ChangeSet, error) {
	s, err := DefaultStore()
	if err != nil {
		return nil, err
	}
	return s.Create(ws, session)
}

// Open opens a change set of the default Store; see Store.Open.
func Open(idOrSession string) (*ChangeSet, error) {
	s, err := DefaultStore()
	if err != nil {
		return nil, err
	}
	return s.Open(idOrSession)
}

// List lists the change sets of the default Store; see Store.List.
func List() ([]Info, error) {
	s, err := DefaultStore()
	if err != nil {
		return nil, err
	}
	return s.List()
}

// Command is one run recorded in a change set.
type Command struct {
	Args []string  `json:"args"`
	At   time.Time `json:"at"`
	// Protect is the run's protected paths (workspace.protect, relative
	// to the workspace): moat apply refuses changes under them unless
	// each is forced.
	Protect []string `json:"protect,omitempty"`
}

// baseline is what conflict detection compares against (see apply.go):
// the kernel's clock when the change set was created, read from the ctime
// of the freshly made upper directory, and the ctimes Apply itself left on
// the paths it changed.
type baseline struct {
	Ctime   stamp            `json:"ctime"`
	Settled map[string]stamp `json:"settled,omitempty"`
}

// meta is runs/<id>/meta.json.
type meta struct {
	ID        string `json:"id"`
	Session   string `json:"session,omitempty"`
	Workspace string `json:"workspace"`
	// WorkspaceDev and WorkspaceIno are the workspace directory's when
	// the change set was made: Apply refuses another directory put or
	// mounted at its path (0 in a set made before they were kept).
	WorkspaceDev uint64 `json:"workspace_dev,omitempty"`
	WorkspaceIno uint64 `json:"workspace_ino,omitempty"`
	// Copy: upper/ is a full copy of the workspace (CreateCopy), not an
	// overlay upper layer.
	Copy bool `json:"copy,omitempty"`
	// Incomplete: CreateCopy has not finished copying the workspace (into
	// copy/, renamed to upper/ once whole). It is saved before the copy
	// starts and cleared, with Copy set, after the rename, so a process
	// killed in between leaves a change set marked as unusable rather
	// than a partial copy that would read as changes: files missing,
	// empty or with the 0600 mode of one caught mid-write. Copy stays
	// false meanwhile, so that a moat predating this field reads the
	// set as an overlay layer holding no change, not as a copy that
	// deletes what it lacks.
	Incomplete bool      `json:"incomplete,omitempty"`
	Created    time.Time `json:"created"`
	Commands   []Command `json:"commands"`
	Baseline   baseline  `json:"baseline"`
}

// Info describes a kept change set, for `moat runs`.
type Info struct {
	ID        string    `json:"id"`
	Session   string    `json:"session,omitempty"`
	Workspace string    `json:"workspace"`
	Created   time.Time `json:"created"`
	// LastUsed is when the last command was recorded (Created if none).
	LastUsed time.Time `json:"last_used"`
	Commands []Command `json:"commands"`
	// Size is the disk space of the upper layer, in bytes.
	Size int64 `json:"size"`
	// PendingApply is set when an interrupted Apply awaits Recover.
	PendingApply bool `json:"pending_apply,omitempty"`
	// Incomplete is set while CreateCopy is still copying the workspace
	// (a change set whose copy was interrupted is removed by List).
	Incomplete bool `json:"incomplete,omitempty"`
	// Merging is set while a run's changes are being merged into the
	// change set, or when that merge was interrupted (see CheckComplete).
	// Such a set holds earlier runs' changes, so List leaves it.
	Merging bool `json:"merging,omitempty"`
}

// ChangeSet is one overlay upper layer over a workspace and what moat
// knows about it. It lives in STATE/runs/<id>/:
//
//	upper/      the overlay upper layer (upperdir=)
//	copy/       present only while CreateCopy copies the workspace
//	work/       the overlay work directory (workdir=), same filesystem
//	meta.json   id, session, workspace, created, commands, baseline
//	lock        flock'ed while a run, an Apply or a Discard uses it
//	journal     present only while an Apply is in progress or interrupted
//	apply/      backups of the files an Apply replaces, beside the journal
//
// A ChangeSet is not safe for concurrent use by several goroutines;
// separate processes are kept apart by Lock.
type ChangeSet struct {
	dir  string
	meta meta
	lock *os.File
	// kept: what the last rollback left as the host changed it (see undo).
	kept []Conflict
}

// Create starts an empty change set over the workspace directory ws. A
// non-empty session names it; the name must be unused (Open it instead),
// 1 to 64 of [A-Za-z0-9._-] and not look like an ID. The upper directory
// gets the workspace root's permission bits, since the overlay's root takes
// the upper root's attributes. Create does not walk the workspace: its cost
// does not depend on the workspace's size.
func (s *Store) Create(ws, session string) (*ChangeSet, error) {
	return s.create(ws, session, false)
}

// create is Create; copying marks the change set Incomplete (see meta)
// and returns it locked, so that List tells a copy in progress (locked)
// from one whose process died (unlocked) without a window in between: the
// lock is taken before meta.json, which makes the set visible, exists.
func (s *Store) create(ws, session string, copying bool) (*ChangeSet, error) {
	real, err := canonicalWorkspace(ws)
	if err != nil {
		return nil, err
	}
	if session != "" && (!isSessionName(session) || isID(session)) {
		return nil, fmt.Errorf("session name %q: use 1-64 of A-Z a-z 0-9 . _ - (and not 12 hex digits)", session)
	}
	wfi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	runs := filepath.Join(s.Dir, "runs")
	if err := os.MkdirAll(runs, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	sweepUnmade(runs)
	if session != "" {
		// The store lock makes "is this name free" and "take it" one step.
		unlock, err := lockFile(filepath.Join(runs, ".lock"), true)
		if err != nil {
			return nil, err
		}
		defer unlock()
		if c, err := s.Open(session); err == nil {
			return nil, fmt.Errorf("session %q (%s): %w", session, c.ID(), ErrExists)
		}
	}
	var b [6]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	dir := filepath.Join(runs, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create change set: %w", err)
	}
	_, wdev, wino, _ := blocksOf(wfi)
	c := &ChangeSet{dir: dir, meta: meta{ID: id, Session: session, Workspace: real, WorkspaceDev: wdev, WorkspaceIno: wino,
		Created: time.Now().UTC(), Commands: []Command{}, Incomplete: copying}}
	if copying {
		if err := c.Lock(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := c.init(modeOf(wfi)); err != nil {
		os.RemoveAll(dir)
		c.Unlock()
		return nil, err
	}
	return c, nil
}

// CreateCopy is Create for hosts where overlay cannot be mounted
// (--workspace-mode copy): UpperDir receives a full copy of the workspace
// (regular files, directories and symlinks, with their permission bits;
// special files are left out) for the backend to bind read-write, and
// Changes compares the copy with the workspace, so review and Apply work
// the same way. Its cost grows with the workspace.
//
// The copy is made in copy/ and renamed to upper/ only once whole, and the
// change set stays marked Incomplete until then: a process killed while
// copying leaves a set that Changes, WriteDiff and Apply refuse
// (ErrIncomplete) and List removes, never a partial copy read as changes.
//
// max, when above zero, bounds the copy's files (the sum of their sizes,
// a sparse file's whole size), and its entries (files, directories and
// links, its root included) as the disk limit's tmpfs bounds its inodes
// (backend.TmpfsInodes): empty files and directories take no bytes but
// do take the host's inodes and the kernel's memory. The copy stops at
// the first entry that would take it past either bound, is removed, and
// CreateCopy returns ErrCopyTooLarge. The copy lands on the state
// directory's filesystem, not under any size-bounded tmpfs, so a caller
// with a disk limit passes it here rather than learn after the copy that
// it was too large.
//
// A copy cut short by ctx leaves nothing, and returns ctx's error.
func (s *Store) CreateCopy(ctx context.Context, ws, session string, max int64) (*ChangeSet, error) {
	c, err := s.create(ws, session, true)
	if err != nil {
		return nil, err
	}
	// The lock only kept List from taking the copy for an abandoned one;
	// a run takes it again for itself.
	defer c.Unlock()
	if err := c.copyWorkspace(ctx, max); err != nil {
		removeAll(c.dir)
		return nil, fmt.Errorf("copy workspace: %w", err)
	}
	return c, nil
}

func (c *ChangeSet) copyWorkspace(ctx context.Context, max int64) error {
	staging := filepath.Join(c.dir, "copy")
	if err := os.Mkdir(staging, 0o700); err != nil {
		return err
	}
	// As root, the copy keeps each file's owner, the workspace's own
	// included: its mount maps the workspace's owner to the command's
	// user, as the workspace's does, and another user's closed directory
	// stays closed to the command instead of becoming the copy's, and so
	// the command's.
	owners := os.Geteuid() == 0
	if err := copyTree(ctx, c.meta.Workspace, staging, owners, max); err != nil {
		return err
	}
	// upper/ (empty, made by Create for its baseline) gives the root its
	// mode, as it does for an overlay.
	fi, err := os.Lstat(c.UpperDir())
	if err != nil {
		return err
	}
	if err := os.Chmod(staging, modeOf(fi)); err != nil {
		return err
	}
	// rename(2) replaces an empty directory: upper/ is either the empty
	// one or the whole copy, never part of it. (os.Rename refuses an
	// existing directory as the target, whatever the system allows.)
	if err := syscall.Rename(staging, c.UpperDir()); err != nil {
		return &os.LinkError{Op: "rename", Old: staging, New: c.UpperDir(), Err: err}
	}
	c.meta.Copy, c.meta.Incomplete = true, false
	return c.save(false)
}

// testHookCopyFile, when set (by tests), runs before each file copyTree
// copies, with the file's destination.
var testHookCopyFile func(dst string)

// copyTree copies src's regular files, directories and symlinks into the
// directory dst, with their permission bits, and with their owners too
// when owners is set (src's own owner then goes to dst). max, when above
// zero, bounds the sum of the files' sizes and the number of entries
// (ErrCopyTooLarge; see CreateCopy).
func copyTree(ctx context.Context, src, dst string, owners bool, max int64) error {
	type dirMode struct {
		path string
		mode fs.FileMode
	}
	var dirs []dirMode
	var size, entries int64
	maxEntries := backend.TmpfsInodes(max)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err // a run interrupted while it sets up
		}
		rel, _ := filepath.Rel(src, p)
		// Counted as the walk meets them, the root (dst's own inode)
		// included, before one is made: what is left out (special files,
		// a file gone since the walk) counts too, on the safe side.
		if entries++; max > 0 && entries > maxEntries {
			return fmt.Errorf("%w: it has over %d files, directories and links, the most it may hold (as many as the tmpfs of limits.disk, --disk, holds), at %s", ErrCopyTooLarge, maxEntries, QuoteName(rel))
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch typeOf(fi) {
		case Dir:
			if rel == "." {
				break // dst, there already: only its owner is src's
			}
			dirs = append(dirs, dirMode{to, modeOf(fi)})
			err = os.Mkdir(to, 0o700)
		case Symlink:
			var target string
			if target, err = os.Readlink(p); err == nil {
				err = os.Symlink(target, to)
			}
		case File:
			if testHookCopyFile != nil {
				testHookCopyFile(to)
			}
			// The file is copied as it is when opened, with that file's
			// mode and owner: what the walk saw may have been replaced
			// since (by a command writing the workspace directly), and a
			// symlink or FIFO put there is left out as one found by the
			// walk would be.
			var in *os.File
			in, fi, err = overlay.OpenRegular(p)
			if errors.Is(err, overlay.ErrNotRegular) || errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err == nil && max > 0 && fi.Size() > max-size {
				// Checked on the file opened, before a byte of it is
				// copied: one file may be the whole excess.
				in.Close()
				return fmt.Errorf("%w: its files are over %d bytes, the most it may hold (limits.disk, --disk), at %s", ErrCopyTooLarge, max, QuoteName(rel))
			}
			if err == nil {
				size += fi.Size()
				err = overlay.CopyFrom(in, to, fi.Mode().Perm(), false)
				in.Close()
			}
		default:
			return nil
		}
		if err == nil && owners {
			st := fi.Sys().(*syscall.Stat_t)
			err = os.Lchown(to, int(st.Uid), int(st.Gid))
		}
		return err
	})
	// Directory modes last, deepest first: a read-only one must not stop
	// its own copy.
	for i := len(dirs) - 1; i >= 0 && err == nil; i-- {
		err = os.Chmod(dirs[i].path, dirs[i].mode)
	}
	return err
}

func (c *ChangeSet) init(rootMode fs.FileMode) error {
	if err := os.Mkdir(c.UpperDir(), 0o700); err != nil {
		return fmt.Errorf("create change set: %w", err)
	}
	// The baseline clock is the ctime of the upper directory after a
	// chmod, taken so that every change made to the workspace before
	// Create has an earlier ctime, and every change after it one at least
	// as late (counted as changed: the safe side).
	//   - With multigrain timestamps (Linux 6.13+ on ext4, xfs, btrfs,
	//     tmpfs) a change to an inode whose ctime was queried (hence the
	//     Lstat first) gets a fine-grained time, later than any timestamp
	//     given out before.
	//   - Otherwise inodes are stamped with the coarse clock, and a file
	//     changed just before Create in the same clock tick (1-10 ms) would
	//     get the baseline's own time. So the chmod is repeated until its
	//     ctime is past the coarse clock as it was when Create began: at
	//     most one tick's wait. After ~50 ms (a filesystem with a coarser
	//     granularity) the baseline is taken as it is, on the safe side.
	start := coarseNow()
	if _, err := os.Lstat(c.UpperDir()); err != nil {
		return fmt.Errorf("create change set: %w", err)
	}
	for try := 0; ; try++ {
		if err := os.Chmod(c.UpperDir(), rootMode); err != nil {
			return fmt.Errorf("create change set: %w", err)
		}
		fi, err := os.Lstat(c.UpperDir())
		if err != nil {
			return fmt.Errorf("create change set: %w", err)
		}
		c.meta.Baseline.Ctime = ctimeOf(fi)
		if start.before(c.meta.Baseline.Ctime) || try == 50 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := os.Mkdir(c.WorkDir(), 0o700); err != nil {
		return fmt.Errorf("create change set: %w", err)
	}
	return c.save(false)
}

func canonicalWorkspace(ws string) (string, error) {
	abs, err := filepath.Abs(ws)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", ws, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", ws, err)
	}
	return real, nil
}

// Open opens the change set whose ID or session name is idOrSession.
// It fails with ErrNotFound when there is none.
func (s *Store) Open(idOrSession string) (*ChangeSet, error) {
	runs := filepath.Join(s.Dir, "runs")
	if isID(idOrSession) {
		c, err := load(filepath.Join(runs, idOrSession))
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	all, err := s.all()
	if err != nil {
		return nil, err
	}
	for _, c := range all {
		if c.meta.Session != "" && c.meta.Session == idOrSession {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%q: %w", idOrSession, ErrNotFound)
}

// List returns every change set of the Store, oldest first. A change set
// whose copy was interrupted (see CreateCopy) is removed, not listed; one
// still being copied is listed with Incomplete set.
func (s *Store) List() ([]Info, error) {
	all, err := s.all()
	if err != nil {
		return nil, err
	}
	infos := make([]Info, 0, len(all))
	for _, c := range all {
		infos = append(infos, c.Info())
	}
	return infos, nil
}

func (s *Store) all() ([]*ChangeSet, error) {
	runs := filepath.Join(s.Dir, "runs")
	entries, err := os.ReadDir(runs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list change sets: %w", err)
	}
	var all []*ChangeSet
	for _, e := range entries {
		if id, ok := strings.CutPrefix(e.Name(), discardPrefix); ok && isID(id) {
			removeAll(filepath.Join(runs, e.Name())) // a discard cut short
			continue
		}
		if !isID(e.Name()) {
			continue
		}
		c, err := load(filepath.Join(runs, e.Name()))
		if err != nil {
			// Being created or discarded right now; or, long after, a
			// directory whose process died before it was a change set.
			if fi, ierr := e.Info(); errors.Is(err, fs.ErrNotExist) && ierr == nil && time.Since(fi.ModTime()) > abandonedAge {
				removeAll(filepath.Join(runs, e.Name()))
			}
			continue
		}
		if c.meta.Incomplete && c.Lock() == nil {
			// Nobody is copying into it (CreateCopy holds the lock until
			// the copy is whole): its process died. It holds nothing but
			// part of a copy of the workspace, so nothing is lost.
			removeAll(c.dir)
			c.Unlock()
			continue
		}
		if c.abandonedEmpty() {
			continue
		}
		all = append(all, c)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].meta.Created.Before(all[j].meta.Created) })
	return all, nil
}

func load(dir string) (*ChangeSet, error) {
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return nil, err
	}
	c := &ChangeSet{dir: dir}
	if err := json.Unmarshal(b, &c.meta); err != nil {
		return nil, fmt.Errorf("change set %s: meta.json: %w", filepath.Base(dir), err)
	}
	// Commands recorded since meta.json was written, one JSON line each.
	if b, err := os.ReadFile(filepath.Join(dir, commandsFile)); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			var cmd Command
			if len(line) > 0 && json.Unmarshal(line, &cmd) == nil {
				c.meta.Commands = append(c.meta.Commands, cmd)
			}
		}
	}
	return c, nil
}

// commandsFile holds the command history as appended JSON lines: a run
// appends one line instead of rewriting meta.json, which on a filesystem
// mounted with "discard" costs milliseconds per run (the replaced inode's
// blocks are discarded before rename returns).
const commandsFile = "commands.jsonl"

// save writes meta.json atomically; durable adds an fsync, which costs
// milliseconds and matters only for what Apply records.
func (c *ChangeSet) save(durable bool) error {
	b, err := json.MarshalIndent(c.meta, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(c.dir, "meta.json"), append(b, '\n'), 0o600, durable); err != nil {
		return err
	}
	// meta.json now holds the whole history.
	if err := os.Remove(filepath.Join(c.dir, commandsFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ID is the change set's random 12-hex-digit identifier.
func (c *ChangeSet) ID() string { return c.meta.ID }

// Session is the session name, or "".
func (c *ChangeSet) Session() string { return c.meta.Session }

// Workspace is the real directory the change set applies to (absolute,
// symlinks resolved): the overlay's lowerdir.
func (c *ChangeSet) Workspace() string { return c.meta.Workspace }

// Dir is STATE/runs/<id>.
func (c *ChangeSet) Dir() string { return c.dir }

// UpperDir is the overlay's upperdir.
func (c *ChangeSet) UpperDir() string { return filepath.Join(c.dir, "upper") }

// WorkDir is the overlay's workdir (on the same filesystem as UpperDir,
// as overlayfs requires).
func (c *ChangeSet) WorkDir() string { return filepath.Join(c.dir, "work") }

// Info describes the change set; Size walks the upper layer.
func (c *ChangeSet) Info() Info {
	in := Info{ID: c.meta.ID, Session: c.meta.Session, Workspace: c.meta.Workspace,
		Created: c.meta.Created, LastUsed: c.meta.Created, Commands: c.meta.Commands}
	if n := len(c.meta.Commands); n > 0 {
		in.LastUsed = c.meta.Commands[n-1].At
	}
	in.Size, _ = DirSize(c.UpperDir())
	_, err := os.Lstat(c.journalPath())
	in.PendingApply = err == nil
	in.Incomplete = c.meta.Incomplete
	in.Merging = c.merging()
	return in
}

// merging reports whether the upper layer carries overlay.MergeXattr (or
// cannot be read for it: the safe side).
func (c *ChangeSet) merging() bool {
	v, err := xattr(c.UpperDir(), overlay.MergeXattr)
	return err != nil || v != ""
}

// CheckComplete returns an error wrapping ErrIncomplete when the change
// set's copy of the workspace never finished (see CreateCopy), as
// recorded when it was opened, or when a run's changes are being merged
// into it or their merge was interrupted (overlay.MergeXattr): such a
// set may only be discarded.
func (c *ChangeSet) CheckComplete() error {
	if c.meta.Incomplete {
		return fmt.Errorf("change set %s: the run that made it was interrupted while copying the workspace: %w", c.meta.ID, ErrIncomplete)
	}
	if v, err := xattr(c.UpperDir(), overlay.MergeXattr); err == nil && v == overlay.MergePending {
		return fmt.Errorf("change set %s: a run or session under a disk limit, whose changes stay on its own tmpfs until it ends, is still running or was killed before they were saved into it (they are then lost): %w", c.meta.ID, ErrIncomplete)
	}
	if c.merging() {
		return fmt.Errorf("change set %s: a run's changes were being saved into it (under a disk limit) and that did not finish, so it may hold part of them: %w", c.meta.ID, ErrIncomplete)
	}
	return nil
}

// Record appends a command to the change set's history (a session
// accumulates one per run), with the run's protected paths.
func (c *ChangeSet) Record(cmd, protect []string) error {
	entry := Command{Args: append([]string(nil), cmd...), At: time.Now().UTC(), Protect: append([]string(nil), protect...)}
	b, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(c.dir, commandsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("record command: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("record command: %w", err)
	}
	c.meta.Commands = append(c.meta.Commands, entry)
	return nil
}

// Protected is every path a run of the change set protected (see
// Command.Protect), each once.
func (c *ChangeSet) Protected() []string {
	var out []string
	for _, cmd := range c.meta.Commands {
		for _, p := range cmd.Protect {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// Lock marks the change set as in use by this process until Unlock (or
// the process's death): the CLI holds it for the whole of a run, since an
// overlay upper layer must not be mounted twice. Apply and Discard take
// it themselves and fail with ErrBusy while another process holds it.
func (c *ChangeSet) Lock() error {
	if c.lock != nil {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(c.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("lock change set: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		return fmt.Errorf("lock change set %s: %w", c.meta.ID, err)
	}
	c.lock = f
	return nil
}

// InUse reports whether another process (a run, a session, an apply)
// holds the change set (Lock): what it holds may still change.
func (c *ChangeSet) InUse() bool {
	if c.lock != nil {
		return false
	}
	unlock, err := lockFile(filepath.Join(c.dir, "lock"), false)
	if err != nil {
		return errors.Is(err, ErrBusy)
	}
	unlock()
	return false
}

// reviewedLive is the file NoteReview leaves in a change set reviewed
// while in use; reviewedRuns holds the number of runs it had at its last
// review.
const (
	reviewedLive = "reviewed-in-use"
	reviewedRuns = "reviewed-runs"
)

// runsSinceReview is the number of runs recorded in the change set after
// its last review; 0 when it was never reviewed.
func (c *ChangeSet) runsSinceReview() int {
	b, err := os.ReadFile(filepath.Join(c.dir, reviewedRuns))
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return 0
	}
	return max(len(c.meta.Commands)-n, 0)
}

// NoteReview records that a person was shown the change set's changes:
// while it was in use (inUse), so that Apply refuses it until a review
// of it no longer in use (ErrStaleReview); a command still running could
// change it after the review, and the apply would write what nobody saw.
//
// It also records how many runs the change set had then: a run recorded
// since (a named session's next run) adds changes nobody was shown, and
// Apply refuses them the same way until they are reviewed.
func (c *ChangeSet) NoteReview(inUse bool) error {
	n := strconv.Itoa(len(c.meta.Commands))
	if err := os.WriteFile(filepath.Join(c.dir, reviewedRuns), []byte(n), 0o600); err != nil {
		return err
	}
	p := filepath.Join(c.dir, reviewedLive)
	if !inUse {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return os.WriteFile(p, nil, 0o600)
}

// Unlock releases Lock.
func (c *ChangeSet) Unlock() {
	if c.lock != nil {
		c.lock.Close()
		c.lock = nil
	}
}

// withLock runs f holding the lock, and releases it after unless the
// caller already held it.
func (c *ChangeSet) withLock(f func() error) error {
	held := c.lock != nil
	if err := c.Lock(); err != nil {
		return err
	}
	if !held {
		defer c.Unlock()
	}
	return f()
}

func lockFile(path string, wait bool) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err = flock(f)
		if !wait || !errors.Is(err, ErrBusy) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// Discard removes the change set and everything in its directory; an
// interrupted Apply is first finished or rolled back (Recover), so the
// real workspace is never left half-applied. The ChangeSet is unusable
// afterwards.
func (c *ChangeSet) Discard() error {
	return c.withLock(func() error {
		if err := c.recover(); err != nil {
			return err
		}
		return c.discardLocked()
	})
}

// DiscardIfEmpty discards c, and says so, when it is an overlay change
// set whose upper layer holds nothing: a session that ended without
// writing anything leaves nothing to review, and its empty set would be
// listed, and picked by apply and diff as the latest. A copy change set
// (its layer is a whole copy), one with an apply under way, one whose
// layer carries the mark of changes not yet saved into it or whose
// saving was cut short (overlay.MergeXattr: a run or session under a
// disk limit killed first, whose changes were lost; empty, it would
// read as one that changed nothing), or one that another process holds
// is kept.
func (c *ChangeSet) DiscardIfEmpty() (bool, error) {
	if c.meta.Copy {
		return false, nil
	}
	discarded := false
	err := c.withLock(func() error {
		if _, err := os.Lstat(c.journalPath()); !errors.Is(err, fs.ErrNotExist) {
			return nil // an apply's journal: Discard finishes it first
		}
		if ents, err := os.ReadDir(c.UpperDir()); err != nil || len(ents) > 0 || c.merging() {
			return nil
		}
		// The workspace root's mode, changed, is in the upper layer's own
		// (a change, as Changes says: chmod 750 . was dropped for empty,
		// found by a tester).
		ufi, uerr := os.Lstat(c.UpperDir())
		lfi, lerr := os.Lstat(c.Workspace())
		if uerr != nil || lerr == nil && modeOf(ufi) != modeOf(lfi) {
			return nil
		}
		if err := c.discardLocked(); err != nil {
			return err
		}
		discarded = true
		return nil
	})
	return discarded, err
}

// discardLocked removes c's directory; c's lock is held.
func (c *ChangeSet) discardLocked() error {
	// Out of sight first, in one step: a discard cut short half way
	// through the removal would leave a change set holding part of its
	// changes, which apply would then apply. Store.all removes what such
	// a discard left.
	dir := c.dir
	trash := filepath.Join(filepath.Dir(c.dir), discardPrefix+filepath.Base(c.dir))
	if err := os.Rename(c.dir, trash); err == nil {
		dir = trash
	}
	if err := removeAll(dir); err != nil {
		return fmt.Errorf("discard %s: %w", c.meta.ID, err)
	}
	return nil
}

// sweepUnmade removes from runs the directories of change sets whose
// process died (moat killed) before it wrote their meta.json, long
// enough ago that none is still being made: no listing shows them, so
// without this they would stay until the next `moat runs`. It costs a
// look per entry, on top of the directory read.
func sweepUnmade(runs string) {
	entries, err := os.ReadDir(runs)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !isID(e.Name()) {
			continue
		}
		dir := filepath.Join(runs, e.Name())
		if _, err := os.Lstat(filepath.Join(dir, "meta.json")); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > abandonedAge {
			removeAll(dir)
		}
	}
}

// abandonedAge is how old a change set no run or session holds must be
// before a listing takes it for one whose process died: a run creates
// its set and locks it a moment later.
const abandonedAge = time.Minute

// abandonedEmpty removes c, and says so, when it is an overlay change set
// of no name (a run's own, not a --session's or a daemon session's) that
// nobody holds and whose upper layer is empty: what a run killed before
// its command wrote anything left (its end would have removed it), which
// would otherwise be listed, and picked by apply and diff as the latest,
// for good.
//
// A copy change set is compared with the workspace instead (a walk of
// both), once: one that differs in nothing goes, as an overlay's empty
// upper layer does (found by a tester: a copy run killed left the whole
// copy for good); one that differs is marked (keptMarker) and kept for
// review, not walked again.
func (c *ChangeSet) abandonedEmpty() bool {
	if c.meta.Session != "" || time.Since(c.meta.Created) < abandonedAge {
		return false
	}
	if c.meta.Copy {
		return c.abandonedCopy()
	}
	if ents, err := os.ReadDir(c.UpperDir()); err != nil || len(ents) > 0 {
		return false
	}
	if c.Lock() != nil {
		return false
	}
	defer c.Unlock()
	if ents, err := os.ReadDir(c.UpperDir()); err != nil || len(ents) > 0 {
		return false
	}
	return removeAll(c.dir) == nil
}

// keptMarker, in a copy change set's directory, says that a listing found
// the copy of a run nobody holds any more to differ from the workspace.
const keptMarker = "abandoned-changed"

// abandonedCopy is abandonedEmpty for a copy change set.
func (c *ChangeSet) abandonedCopy() bool {
	marker := filepath.Join(c.dir, keptMarker)
	if _, err := os.Lstat(marker); err == nil {
		return false
	}
	if c.Lock() != nil {
		return false
	}
	defer c.Unlock()
	changes, err := c.Changes()
	if err != nil {
		return false
	}
	if len(changes) > 0 {
		os.WriteFile(marker, nil, 0o600)
		return false
	}
	return removeAll(c.dir) == nil
}

// discardPrefix names a change set's directory while Discard removes it.
const discardPrefix = ".discard-"

// removeAll is RemoveTree.
func removeAll(dir string) error { return RemoveTree(dir) }

// isID reports whether s is a change set id: 12 lower-case hex digits.
// (Hand-written rather than a regexp: every moat process, the sandbox's
// init included, would compile the pattern at start-up.)
func isID(s string) bool {
	if len(s) != 12 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// isSessionName reports whether s is a valid session name: a letter or
// digit, then up to 63 letters, digits, '.', '_' or '-'.
func isSessionName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i, c := range s {
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return false
		}
	}
	return true
}

// DropUnsavedRun clears the mark a run under a disk limit leaves until its
// changes are saved into the set (overlay.MergePending), once that run has
// ended without saving them (its init killed first: the memory limit's
// OOM killer can choose it), and reports whether there was one. The
// merge never began, so the layer holds what earlier runs saved, whole:
// those stay reviewable, and only that run's changes are lost. Only the
// caller that ran it may call it, after the run ended and while it holds
// the set's lock: a run still going has the mark too.
func (c *ChangeSet) DropUnsavedRun() (bool, error) {
	v, err := xattr(c.UpperDir(), overlay.MergeXattr)
	if err != nil || v != overlay.MergePending {
		return false, err
	}
	if err := removeXattr(c.UpperDir(), overlay.MergeXattr); err != nil {
		return false, fmt.Errorf("change set %s: clear the mark of a run whose changes were not saved: %w", c.meta.ID, err)
	}
	return true, nil
}
