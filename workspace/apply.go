package workspace

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/moatbox/moat/internal/overlay"
)

// Conflict detection
//
// A change set records no copy of the workspace. Its baseline is the
// kernel's clock when it was created (T0: the ctime of its new upper
// directory), and it relies on one property of ctime: the kernel sets it
// to "now" on every change to a file's content, mode, owner, links or
// name, and user space cannot set it back. So, at Apply:
//
//   - a workspace path the change set replaces, chmods or removes is a
//     conflict when its ctime is >= T0 (or, for a directory being removed,
//     when anything below it has such a ctime);
//   - a path the change set creates that does not exist now may have been
//     deleted on the host: it is a conflict when its nearest existing
//     ancestor directory has a ctime >= T0, since removing an entry
//     changes the directory. (This errs towards refusing: a host that
//     created an unrelated file in the same directory also makes it a
//     conflict.)
//
// Apply's own changes would look like host edits to a later Apply of the
// same change set, so it records the ctimes it leaves (baseline.Settled)
// and a path whose ctime is exactly that is not a conflict. Walking the
// workspace at Create instead would make Create cost grow with the tree
// (a walk with lstat took 20-45 ms for 10,000 files on this project's
// machines, against a start-up budget of 2 ms for the whole overlay) and still race with host edits during the walk.
// Limits: a filesystem without real ctimes (some FUSE ones), or a clock
// stepped backwards, defeats the check; Force overrides it per path.

// Report is what Apply did or refused.
type Report struct {
	// Applied are the changes now in the workspace.
	Applied []Change `json:"applied"`
	// Conflicts are the paths refused because the workspace changed since
	// the change set was created; when not empty, nothing was applied.
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// Forced are conflicts overridden by the force list, applied anyway.
	Forced []Conflict `json:"forced,omitempty"`
	// Skipped are special files (devices, fifos, sockets), never applied.
	Skipped []Change `json:"skipped,omitempty"`
	// Protected are the selected changes to paths that host tools execute
	// or read as configuration (see ChangeSet.Protects), or that make a
	// directory a git directory (a bare repository's layout), not forced;
	// when not empty, nothing was applied.
	Protected []string `json:"protected,omitempty"`
	// ProtectedForced are the selected changes to such paths that the
	// force list let through: said, since a force of a directory (".")
	// lets every one below it through at once.
	ProtectedForced []string `json:"protected_forced,omitempty"`
	// Recovered says what Apply did first with another change set's
	// apply into the same workspace that was killed part way (finished
	// or rolled back it).
	Recovered []string `json:"recovered,omitempty"`
}

// Conflict is a path the host changed since the change set was created.
type Conflict struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Apply copies the selected changes into the real workspace: paths
// (slash-separated, relative to the workspace, or absolute inside it)
// select the changes at and below them, nil selects all; the directories
// a selected change needs are created with it. Each file lands atomically
// (written beside as .moat-tmp-*, fsynced, renamed; mode kept; symlinks
// made beside and renamed; deletions renamed aside first). The names of
// one file in the change set (hard links) land as one file: the first is
// copied, the others linked to it (a copy where a link cannot be made).
//
// It refuses, applying nothing, when a selected change touches a path
// that host tools execute or read as configuration (ChangeSet.Protects),
// or makes a directory a git directory without a .git in its name, or
// changes what decides what git runs in one (a bare repository's layout,
// which git's discovery takes as a repository: see gitdir.go), unless a
// path of force is at or above it: the Report lists them and the
// error wraps ErrProtected. It refuses too when a selected change touches
// a path the host changed since Create (see "Conflict detection"): the Report lists
// the conflicts and the error wraps ErrConflict. A conflict at or below a
// path of force is applied anyway.
//
// The check is made again on each path right before Apply replaces,
// removes or creates it (and, for a file it backs up, before and after
// the backup): a host edit made while Apply runs stops it, rolls back
// what it applied, and is reported the same way (reason "changed on the
// host while apply ran"). A host edit of a file after Apply wrote it is
// kept, by the rollback too, and a later Apply takes it for a conflict.
// What is left unseen: an edit in the instant between the last check and
// the rename over the file, and a write through a descriptor the host
// opened before the rename, which goes to the replaced file.
//
// Either every selected change lands or none does, even if the process
// dies halfway: a journal in the change set's directory, written before
// the workspace is touched, lets the next Apply, Recover or Discard roll
// the workspace back (or, when the journal was committed, finish).
func (c *ChangeSet) Apply(paths, force []string) (Report, error) {
	var rep Report
	if err := checkForce(force); err != nil {
		return rep, err
	}
	err := c.withLock(func() error {
		// Before anything else, Recover included: an incomplete copy is
		// never read as changes (Changes refuses it too).
		if err := c.CheckComplete(); err != nil {
			return err
		}
		if err := c.checkWorkspaceDir("apply"); err != nil {
			return err
		}
		if _, err := os.Lstat(filepath.Join(c.dir, reviewedLive)); err == nil {
			return fmt.Errorf("apply %s: %w: its last review (moat diff) was taken while a run or session could still change it; review it again (moat diff %s), then apply", c.meta.ID, ErrStaleReview, c.meta.ID)
		}
		if n := c.runsSinceReview(); n > 0 {
			return fmt.Errorf("apply %s: %w: %s ran in it after its last review (moat diff), and changed what it holds; review it again (moat diff %s), then apply", c.meta.ID, ErrStaleReview, plural(n, "more run"), c.meta.ID)
		}
		did, err := c.recoverApply()
		if err != nil {
			return err
		}
		switch did {
		case ApplyCompleted:
			rep.Recovered = append(rep.Recovered, "an earlier apply of this change set was interrupted (moat was killed) after every change was written: it was finished first")
		case ApplyRolledBack:
			rep.Recovered = append(rep.Recovered, "an earlier apply of this change set was interrupted (moat was killed): what it had written was rolled back first, and this apply starts from the workspace as it was before it")
		}
		// Another change set's apply into this workspace, killed part
		// way, is finished or rolled back first: this one's checks would
		// otherwise be of a tree nobody made.
		said, err := recoverApplyUnder(c.storeDir(), c.meta.Workspace, c.meta.ID)
		if err != nil {
			return err
		}
		if said != "" {
			rep.Recovered = append(rep.Recovered, said)
		}
		changes, err := c.Changes()
		if err != nil {
			return err
		}
		sel, err := c.selectChanges(changes, paths)
		if err != nil {
			return err
		}
		if err := c.protectedIn(sel, force, &rep); err != nil {
			return err
		}
		plan, err := c.plan(sel, &rep)
		if err != nil {
			return err
		}
		// Before the conflict check, so that a host edit is either seen
		// by the check or made after this, and then found by execute.
		if err := c.expect(plan); err != nil {
			return err
		}
		var conflicts []Conflict
		for _, cf := range c.conflicts(sel) {
			if matchPrefix(force, cf.Path) {
				rep.Forced = append(rep.Forced, cf)
			} else {
				conflicts = append(conflicts, cf)
			}
		}
		if len(conflicts) > 0 {
			rep.Conflicts = conflicts
			return fmt.Errorf("apply %s: %d paths: %w", c.meta.ID, len(conflicts), ErrConflict)
		}
		if len(plan) == 0 {
			return nil
		}
		if testHookBeforeExecute != nil {
			testHookBeforeExecute()
		}
		c.kept = nil
		err = c.execute(plan)
		rep.Conflicts = append(rep.Conflicts, c.kept...)
		if he := (*hostEdit)(nil); errors.As(err, &he) {
			rep.Conflicts = append([]Conflict{{Path: he.path, Reason: "changed on the host while apply ran"}}, rep.Conflicts...)
			return fmt.Errorf("apply %s: %w", c.meta.ID, err)
		}
		if err != nil {
			return err
		}
		for _, ch := range sel {
			if ch.Type != Special {
				rep.Applied = append(rep.Applied, ch)
			}
		}
		return nil
	})
	return rep, err
}

// protectedIn lists in rep the changes of sel that touch a protected path
// (ChangeSet.Protects) or a git directory's layout, not forced, and
// returns ErrProtected (wrapped) when there are any.
func (c *ChangeSet) protectedIn(sel []Change, force []string, rep *Report) error {
	guarded, gitDir := c.protects(), c.gitDirChanges(sel)
	for _, ch := range sel {
		switch {
		case !guarded(ch) && !gitDir(ch):
		case matchPrefix(force, ch.Path):
			rep.ProtectedForced = append(rep.ProtectedForced, ch.Path)
		default:
			rep.Protected = append(rep.Protected, ch.Path)
		}
	}
	if len(rep.Protected) > 0 {
		return fmt.Errorf("apply %s: %d paths: %w", c.meta.ID, len(rep.Protected), ErrProtected)
	}
	return nil
}

// Preview says what Apply(paths, force) would refuse, by looking alone:
// a paths that selects no change, a protected path, a host change since
// the change set was made. It takes no lock and touches nothing, so that
// whoever holds the change set (a daemon's live session) can refuse an
// apply before it ends the session it would end; what a command writes
// after it looked, Apply finds.
func (c *ChangeSet) Preview(paths, force []string) (Report, error) {
	var rep Report
	if err := checkForce(force); err != nil {
		return rep, err
	}
	if err := c.CheckComplete(); err != nil {
		return rep, err
	}
	if err := c.checkWorkspaceDir("apply"); err != nil {
		return rep, err
	}
	changes, err := c.Changes()
	if err != nil {
		return rep, err
	}
	sel, err := c.selectChanges(changes, paths)
	if err != nil {
		return rep, err
	}
	if err := c.protectedIn(sel, force, &rep); err != nil {
		return rep, err
	}
	for _, cf := range c.conflicts(sel) {
		if !matchPrefix(force, cf.Path) {
			rep.Conflicts = append(rep.Conflicts, cf)
		}
	}
	if len(rep.Conflicts) > 0 {
		return rep, fmt.Errorf("apply %s: %d paths: %w", c.meta.ID, len(rep.Conflicts), ErrConflict)
	}
	return rep, nil
}

// checkWorkspaceDir refuses a workspace path that is no longer the
// directory the change set was made of: a symbolic link put in its place
// (to another directory, which apply must not write), a file, another
// directory moved there or mounted over it. Said first, since every path's
// check would otherwise fail on it with a reason of its own.
func (c *ChangeSet) checkWorkspaceDir(what string) error {
	ws := c.meta.Workspace
	fi, err := os.Lstat(ws)
	switch {
	case err != nil:
		return fmt.Errorf("%s %s: workspace: %w", what, c.meta.ID, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		to, _ := os.Readlink(ws)
		return fmt.Errorf("%s %s: %w: %s is now a symbolic link (to %s), not the directory the run used; nothing was applied or read: put that directory back at %s, or discard the change set", what, c.meta.ID, ErrReplaced, ws, to, ws)
	case !fi.IsDir():
		return fmt.Errorf("%s %s: %w: %s is no longer a directory; nothing was applied or read: put it back, or discard the change set", what, c.meta.ID, ErrReplaced, ws)
	}
	if _, dev, ino, _ := blocksOf(fi); c.meta.WorkspaceIno != 0 && (dev != c.meta.WorkspaceDev || ino != c.meta.WorkspaceIno) {
		return fmt.Errorf("%s %s: %w: %s is no longer the directory the run used (another was moved there, or mounted over it); nothing was applied or read: put that directory back, or discard the change set", what, c.meta.ID, ErrReplaced, ws)
	}
	return nil
}

// Recover finishes or rolls back an Apply that was interrupted, so the
// workspace holds either all of its changes or none of them.
func (c *ChangeSet) Recover() error {
	return c.withLock(c.recover)
}

// What RecoverApply did with an interrupted Apply.
const (
	ApplyCompleted  = "completed"   // its journal was committed: finished
	ApplyRolledBack = "rolled back" // it was not: the workspace put back
)

// RecoverApply is Recover, and says what it did: ApplyCompleted,
// ApplyRolledBack, or "" when no Apply was interrupted. A caller that
// finds one (a daemon taking up the change sets a previous one kept)
// says so, rather than change the workspace unseen.
func (c *ChangeSet) RecoverApply() (string, error) {
	var did string
	err := c.withLock(func() (err error) {
		did, err = c.recoverApply()
		return err
	})
	return did, err
}

func (c *ChangeSet) journalPath() string { return filepath.Join(c.dir, "journal") }
func (c *ChangeSet) backupDir() string   { return filepath.Join(c.dir, "apply") }
func (c *ChangeSet) real(p string) string {
	return filepath.Join(c.meta.Workspace, filepath.FromSlash(p))
}
func (c *ChangeSet) upperOf(p string) string {
	return filepath.Join(c.UpperDir(), filepath.FromSlash(p))
}

// relPath turns a user-given path into a workspace-relative slash path.
func (c *ChangeSet) relPath(p string) (string, error) {
	if err := checkNamed(p); err != nil {
		return "", err
	}
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(c.meta.Workspace, p)
		if err != nil {
			return "", err
		}
		p = rel
	}
	p = path.Clean(filepath.ToSlash(p))
	if p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%s is outside the workspace %s", p, c.meta.Workspace)
	}
	return p, nil
}

// checkNamed refuses an empty path, which path.Clean would make "." and
// so the whole workspace: a script's unset variable (moat apply ID
// "$PATHS", --force "$P") must not select or force everything.
func checkNamed(p string) error {
	if p == "" {
		return ErrEmptyPath
	}
	return nil
}

// checkForce refuses a force list that holds an empty path (checkNamed).
func checkForce(force []string) error {
	for _, p := range force {
		if err := checkNamed(p); err != nil {
			return fmt.Errorf("force: %w", err)
		}
	}
	return nil
}

// ErrEmptyPath: Apply or Preview was given "" as a path to select or force.
var ErrEmptyPath = errors.New(`an empty path names nothing: give paths relative to the workspace ("." for all of it)`)

func under(p, prefix string) bool {
	return prefix == "." || p == prefix || strings.HasPrefix(p, prefix+"/")
}

func matchPrefix(prefixes []string, p string) bool {
	for _, pre := range prefixes {
		if under(p, path.Clean(filepath.ToSlash(pre))) {
			return true
		}
	}
	return false
}

// NoChangeError: a path given to Apply has no change at or below it.
type NoChangeError struct {
	Path string // as given
}

func (e *NoChangeError) Error() string { return "no change at " + e.Path }

// Select is what Apply of paths writes of changes: the changes at or
// below paths, with the directory changes they need; all of them when
// paths is empty. A path with no change is a *NoChangeError.
func (c *ChangeSet) Select(changes []Change, paths []string) ([]Change, error) {
	return c.selectChanges(changes, paths)
}

// selectChanges keeps the changes at or below paths, with the directory
// changes they need (their Added or TypeChanged ancestors).
func (c *ChangeSet) selectChanges(changes []Change, paths []string) ([]Change, error) {
	if len(paths) == 0 {
		return changes, nil
	}
	keep := make([]bool, len(changes))
	index := map[string]int{}
	for i, ch := range changes {
		index[ch.Path] = i
	}
	for _, raw := range paths {
		p, err := c.relPath(raw)
		if err != nil {
			return nil, err
		}
		found := false
		for i, ch := range changes {
			if under(ch.Path, p) {
				keep[i], found = true, true
				for a := path.Dir(ch.Path); a != "."; a = path.Dir(a) {
					if j, ok := index[a]; ok && (changes[j].Kind == Added || changes[j].Kind == TypeChanged) {
						keep[j] = true
					}
				}
			}
		}
		if !found {
			return nil, &NoChangeError{Path: raw}
		}
	}
	var out []Change
	for i, ch := range changes {
		if keep[i] {
			out = append(out, ch)
		}
	}
	return out, nil
}

// The operations of an Apply, in journal order. Each can be undone
// whether or not it ran to the end.
type op struct {
	Op      string      `json:"op"` // write, mkdir, remove, chmod
	Path    string      `json:"path"`
	Mode    fs.FileMode `json:"mode,omitempty"`
	OldMode fs.FileMode `json:"old_mode,omitempty"`
	// Link: for write, the new entry is a symlink to Link.
	Link   string `json:"link,omitempty"`
	IsLink bool   `json:"is_link,omitempty"`
	// Tmp: for write, the workspace-relative name it is staged under.
	Tmp string `json:"tmp,omitempty"`
	// Backup: for write over an existing file, the copy of the old one in
	// apply/ (a file, or a symlink); for remove, the workspace-relative
	// name the old entry is renamed aside to.
	Backup string `json:"backup,omitempty"`
	// Was: what Path is expected to be when the operation runs, taken
	// before the conflict check (see expect).
	Was ident `json:"was"`
	// Group: for a write of a file that is one inode with other written
	// files in the change set (hard links), the path of the first of them
	// in the plan. That one is copied and the others are linked to it, so
	// that apply writes what the run made once, as the run's disk limit
	// counted it, not once per name.
	Group string `json:"group,omitempty"`
}

// samePlaced says whether now is what write o placed. For a file of a
// group the ctime is left out: linking the group's other names to it, or
// undoing them, changes it.
func samePlaced(o op, now, placed ident) bool {
	if o.Group != "" {
		now.Ctime, placed.Ctime = stamp{}, stamp{}
	}
	return now == placed
}

// ident is what Apply saw of a workspace entry: enough to tell, right
// before it replaces or removes the entry, whether the host changed it
// since the conflict check. The ctime alone changes with any change (see
// "Conflict detection"); inode, size and mtime are compared too, for a
// filesystem whose clock is coarser than the edit. Tree is, for a
// directory Apply removes, a digest of the identities of everything below
// it, since an edit deep inside changes nothing of the directory itself.
// The zero ident is an absent entry.
type ident struct {
	Exists bool        `json:"exists,omitempty"`
	Dev    uint64      `json:"dev,omitempty"`
	Ino    uint64      `json:"ino,omitempty"`
	Mode   fs.FileMode `json:"mode,omitempty"`
	Size   int64       `json:"size,omitempty"`
	Mtime  int64       `json:"mtime,omitempty"`
	Ctime  stamp       `json:"ctime"`
	Tree   string      `json:"tree,omitempty"`
}

func identOfInfo(fi fs.FileInfo) ident {
	_, dev, ino, _ := blocksOf(fi)
	return ident{Exists: true, Dev: dev, Ino: ino, Mode: fi.Mode(), Size: fi.Size(),
		Mtime: fi.ModTime().UnixNano(), Ctime: ctimeOf(fi)}
}

// identOf is the ident of the entry at p; with tree, and p a directory,
// with the digest of everything below it.
func identOf(p string, tree bool) (ident, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return ident{}, nil
	}
	if err != nil {
		return ident{}, err
	}
	id := identOfInfo(fi)
	if tree && fi.IsDir() {
		if id.Tree, err = treeDigest(p); err != nil {
			return ident{}, err
		}
	}
	return id, nil
}

// treeDigest digests the names (relative to dir) and idents of the
// entries below dir, not dir's own, so that it survives dir's rename.
func treeDigest(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b, _ := json.Marshal(identOfInfo(fi))
		fmt.Fprintf(h, "%q %s\n", p[len(dir):], b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// expect records in each operation what its path should be when it runs:
// as it is now, or absent when an earlier operation of the plan removes
// it or an ancestor (a type change: remove, then create).
func (c *ChangeSet) expect(plan []op) error {
	var removed []string
	for i := range plan {
		o := &plan[i]
		o.Was = ident{}
		if matchPrefix(removed, o.Path) {
			continue
		}
		id, err := identOf(c.real(o.Path), o.Op == "remove")
		if err != nil {
			return fmt.Errorf("apply %s: %w", o.Path, err)
		}
		o.Was = id
		if o.Op == "remove" {
			removed = append(removed, o.Path)
		}
	}
	return nil
}

// hostEdit: the host changed a path between Apply's conflict check and
// the operation on it. It wraps ErrConflict. moved: the operation had
// already renamed the entry aside (a remove), so it must be undone;
// otherwise it changed nothing, and undoing it could only harm the
// host's version.
type hostEdit struct {
	path  string
	moved bool
}

func (e *hostEdit) Error() string {
	return fmt.Sprintf("%s changed on the host while apply ran", e.path)
}
func (e *hostEdit) Unwrap() error { return ErrConflict }

// unchanged fails with a hostEdit when o's path, reached as dst, is no
// longer what expect saw.
func (c *ChangeSet) unchanged(o op, dst string) error {
	now, err := identOf(dst, o.Was.Tree != "")
	if err != nil {
		return fmt.Errorf("apply %s: %w", o.Path, err)
	}
	if now != o.Was {
		return &hostEdit{path: o.Path}
	}
	return nil
}

func (c *ChangeSet) plan(sel []Change, rep *Report) ([]op, error) {
	var plan []op
	n := 0
	aside := func(p, kind string) string {
		n++
		return path.Join(path.Dir(p), fmt.Sprintf(".moat-%s-%s-%d", kind, c.meta.ID, n))
	}
	create := func(ch Change) error {
		switch ch.Type {
		case Dir:
			plan = append(plan, op{Op: "mkdir", Path: ch.Path, Mode: ch.Mode})
		case File, Symlink:
			o := op{Op: "write", Path: ch.Path, Mode: ch.Mode, Tmp: aside(ch.Path, "tmp"), IsLink: ch.Type == Symlink, Link: ch.Target}
			plan = append(plan, o)
		}
		return nil
	}
	for _, ch := range sel {
		switch {
		case ch.Deep:
			return nil, fmt.Errorf("apply %s: %s: %w: its tree goes deeper than moat reads or writes (paths over 4095 bytes); apply the other changes by name, or discard the change set", c.meta.ID, QuoteName(ch.Path), ErrTooDeep)
		case ch.Type == Special:
			rep.Skipped = append(rep.Skipped, ch)
		case ch.Kind == Added:
			create(ch)
		case ch.Kind == Deleted:
			plan = append(plan, op{Op: "remove", Path: ch.Path, Backup: aside(ch.Path, "bak")})
		case ch.Kind == TypeChanged:
			plan = append(plan, op{Op: "remove", Path: ch.Path, Backup: aside(ch.Path, "bak")})
			create(ch)
		case ch.Kind == Modified:
			o := op{Op: "write", Path: ch.Path, Mode: ch.Mode, OldMode: ch.OldMode, Tmp: aside(ch.Path, "tmp"),
				IsLink: ch.Type == Symlink, Link: ch.Target, Backup: strconv.Itoa(len(plan))}
			plan = append(plan, o)
		case ch.Mode != ch.OldMode: // ModeChanged, or Replaced with a new mode
			plan = append(plan, op{Op: "chmod", Path: ch.Path, Mode: ch.Mode, OldMode: ch.OldMode})
		}
	}
	c.group(plan)
	return plan, nil
}

// group sets Group on the writes of plan whose files are one inode in the
// change set.
func (c *ChangeSet) group(plan []op) {
	type inode struct{ dev, ino uint64 }
	first := map[inode]int{}
	for i := range plan {
		o := &plan[i]
		if o.Op != "write" || o.IsLink {
			continue
		}
		fi, err := os.Lstat(c.upperOf(o.Path))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		_, dev, ino, nlink := blocksOf(fi)
		if nlink < 2 || ino == 0 {
			continue
		}
		k := inode{dev, ino}
		h, ok := first[k]
		if !ok {
			first[k] = i
			continue
		}
		plan[h].Group = plan[h].Path
		o.Group = plan[h].Path
	}
}

// hostChanged reports whether the workspace entry p (with status fi)
// changed since the change set was created, other than by Apply.
func (c *ChangeSet) hostChanged(p string, fi fs.FileInfo) bool {
	t := ctimeOf(fi)
	if t.before(c.meta.Baseline.Ctime) {
		return false
	}
	s, ok := c.meta.Baseline.Settled[p]
	return !ok || s != t
}

func (c *ChangeSet) conflicts(sel []Change) []Conflict {
	var out []Conflict
	add := func(p, reason string) { out = append(out, Conflict{Path: p, Reason: reason}) }
	since := c.meta.Created.Local().Format("2006-01-02 15:04:05")
	// Paths whose workspace entry the selection removes or retypes: what
	// is below them is created afresh, and their own check covers what the
	// host may have changed there. Looking below one would follow a
	// workspace symlink the change set replaces.
	var removed []string
	for _, ch := range sel {
		if matchPrefix(removed, ch.Path) {
			continue
		}
		if ch.Kind == Deleted || ch.Kind == TypeChanged {
			removed = append(removed, ch.Path)
		}
		if ch.Type == Dir && ch.Kind == ModeChanged {
			// The change set's directory has the mode the host's had when
			// it was copied up, unless the command changed it: a host
			// directory changed since (its mode, or an entry in it) may
			// be the one that differs, and setting the mode back would
			// undo a person's chmod (a private directory made open).
			if fi, err := os.Lstat(c.real(ch.Path)); err == nil && c.hostChanged(ch.Path, fi) {
				add(ch.Path, fmt.Sprintf("directory changed on the host since %s, and its mode differs (%s there, %s in the change set): who changed it cannot be told; --force it to set %s", since, Octal(modeOf(fi)), Octal(ch.Mode), Octal(ch.Mode)))
			}
			continue
		}
		if ch.Type == Special || (ch.Type == Dir && ch.Kind == Replaced) {
			continue
		}
		fi, err := os.Lstat(c.real(ch.Path))
		switch {
		case ch.Kind == Added:
			if err == nil {
				add(ch.Path, "created on the host since "+since+replacedWhole(c.real(ch.Path), fi, ch))
				continue
			}
			a := path.Dir(ch.Path)
			for ; a != "."; a = path.Dir(a) {
				if _, err := os.Lstat(c.real(a)); err == nil {
					break
				}
			}
			if afi, err := os.Lstat(c.real(a)); err != nil || c.hostChanged(a, afi) {
				add(ch.Path, fmt.Sprintf("directory %s changed on the host since %s: %s may have been deleted there", a, since, ch.Path))
			}
		case err != nil:
			add(ch.Path, "deleted on the host since "+since)
		case c.hostChanged(ch.Path, fi):
			add(ch.Path, "changed on the host since "+since+replacedWhole(c.real(ch.Path), fi, ch))
		case fi.IsDir() && (ch.Kind == Deleted || ch.Kind == TypeChanged):
			filepath.WalkDir(c.real(ch.Path), func(abs string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				dfi, err := d.Info()
				rel, _ := filepath.Rel(c.meta.Workspace, abs)
				if err != nil || c.hostChanged(filepath.ToSlash(rel), dfi) {
					add(ch.Path, fmt.Sprintf("%s changed on the host since %s", filepath.ToSlash(rel), since))
					return filepath.SkipAll
				}
				return nil
			})
		}
	}
	return out
}

// replacedWhole says, for a conflict at the host path p (fi), what
// forcing ch there removes with it: everything in a directory the host
// has where ch puts a file or a link.
func replacedWhole(p string, fi fs.FileInfo, ch Change) string {
	if !fi.IsDir() || ch.Type == Dir {
		return ""
	}
	const most = 10000
	n := -1 // p itself
	filepath.WalkDir(p, func(_ string, _ fs.DirEntry, err error) error {
		if n++; n > most {
			return filepath.SkipAll
		}
		return nil
	})
	switch {
	case n > most:
		return fmt.Sprintf(": it is a directory there, holding over %d entries, all of which --force removes", most)
	case n == 0:
		return ": it is an empty directory there, which --force replaces"
	}
	return fmt.Sprintf(": it is a directory there, holding %d entries, all of which --force removes", n)
}

// journal records are JSON lines: the plan first, then {"done": i} after
// each operation, then {"commit": true}; a rollback adds {"undone": i}
// after each operation it undoes. A torn last line (a crash while
// writing it) is ignored.
type record struct {
	Plan []op `json:"plan,omitempty"`
	Done *int `json:"done,omitempty"`
	// Placed: with Done of a write, the ident of the entry it placed, so
	// that a rollback does not replace or remove it once the host has
	// changed it.
	Placed *ident `json:"placed,omitempty"`
	Commit bool   `json:"commit,omitempty"`
	// Undone: operation i rolled back, by a rollback that may be cut
	// short itself; Kept, why it was left as the host made it.
	Undone *int   `json:"undone,omitempty"`
	Kept   string `json:"kept,omitempty"`
}

type journal struct{ f *os.File }

func (j journal) append(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("apply journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("apply journal: %w", err)
	}
	return nil
}

// testHookAfterUndo, when set (by tests), runs after a rollback has undone
// operation i and journaled it.
var testHookAfterUndo func(i int)

// testHookAfterOp, when set (by tests), runs after operation i has been
// done and journaled, and with i = len(plan) after the commit record.
var testHookAfterOp func(i int)

// testHookBeforeExecute and testHookBeforeOp, when set (by tests), run
// after the conflict check, and before each operation (after the
// backups) with its path: where a host edit would otherwise go unseen.
var (
	testHookBeforeExecute func()
	testHookBeforeOp      func(path string)
)

// execute runs the plan under a journal: backups first (nothing in the
// workspace touched yet), then the journal, then each operation, then the
// commit record and the cleanup.
func (c *ChangeSet) execute(plan []op) error {
	if err := c.backups(plan); err != nil {
		os.RemoveAll(c.backupDir())
		return err
	}
	if err := c.mark(); err != nil {
		os.RemoveAll(c.backupDir())
		return err
	}
	f, err := os.OpenFile(c.journalPath(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		c.unmark()
		return fmt.Errorf("apply journal: %w", err)
	}
	j := journal{f}
	defer f.Close()
	placed := map[int]ident{}
	heads := map[string]int{}
	for i, o := range plan {
		if o.Group != "" && o.Group == o.Path {
			heads[o.Path] = i
		}
	}
	if err := j.append(record{Plan: plan}); err != nil {
		return c.abort(plan, -1, err, placed)
	}
	if err := syncDir(c.dir); err != nil {
		return c.abort(plan, -1, err, placed)
	}
	for i := range plan {
		if testHookBeforeOp != nil {
			testHookBeforeOp(plan[i].Path)
		}
		var head *ident
		if h, ok := heads[plan[i].Group]; ok && h != i {
			if id, ok := placed[h]; ok {
				head = &id
			}
		}
		id, err := c.do(plan[i], head)
		r := record{Done: &i}
		if plan[i].Op == "write" && err == nil {
			placed[i] = id
			r.Placed = &id
		}
		if he := (*hostEdit)(nil); errors.As(err, &he) && !he.moved {
			return c.abort(plan, i-1, err, placed)
		}
		if err != nil {
			return c.abort(plan, i, err, placed)
		}
		if err := j.append(r); err != nil {
			return c.abort(plan, i, err, placed)
		}
		if testHookAfterOp != nil {
			testHookAfterOp(i)
		}
	}
	dirs := map[string]bool{}
	for _, o := range plan {
		dirs[path.Dir(o.Path)] = true
		if o.Op == "mkdir" {
			dirs[o.Path] = true
		}
	}
	for d := range dirs {
		if err := syncDir(c.real(d)); err != nil {
			return c.abort(plan, len(plan)-1, err, placed)
		}
	}
	if err := j.append(record{Commit: true}); err != nil {
		return c.abort(plan, len(plan)-1, err, placed)
	}
	if testHookAfterOp != nil {
		testHookAfterOp(len(plan))
	}
	return c.finish(plan, placed)
}

// abort rolls back operations 0..last after a failure, and returns cause.
func (c *ChangeSet) abort(plan []op, last int, cause error, placed map[int]ident) error {
	if err := c.rollback(plan, last, placed, nil); err != nil {
		return fmt.Errorf("%w (rolling back: %v; the journal is kept for the next apply)", cause, err)
	}
	return cause
}

// backups copies every file a write will replace into apply/.
func (c *ChangeSet) backups(plan []op) error {
	made := false
	for _, o := range plan {
		if o.Op != "write" || o.Backup == "" {
			continue
		}
		made = true
		if err := c.backup(o); err != nil {
			return err
		}
	}
	if !made {
		return nil
	}
	return syncDir(c.backupDir())
}

func (c *ChangeSet) backup(o op) error {
	if err := os.MkdirAll(c.backupDir(), 0o700); err != nil {
		return fmt.Errorf("apply backup: %w", err)
	}
	dst := filepath.Join(c.backupDir(), o.Backup)
	dir, err := c.parentOf(o.Path)
	if err != nil {
		return err
	}
	defer dir.Close()
	src := dir.join(path.Base(o.Path))
	// Checked before and after the copy: the backup is of the file
	// the conflict check passed, which a rollback may put back.
	if err := c.unchanged(o, src); err != nil {
		return err
	}
	fi, err := os.Lstat(src)
	if err != nil {
		return fmt.Errorf("apply backup: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err == nil {
			err = os.Symlink(target, dst)
		}
		if err != nil {
			return fmt.Errorf("apply backup: %w", err)
		}
		return c.unchanged(o, src)
	}
	if err := overlay.CopyFile(src, dst, fi.Mode().Perm(), true); err != nil {
		return fmt.Errorf("apply backup: %w", err)
	}
	// The file's times go with it: a rollback puts them back, and a
	// build tool would take a restored file with a new mtime for a
	// changed one.
	keepTimes(dst, fi)
	return c.unchanged(o, src)
}

// keepTimes gives p the access and modification times of fi.
func keepTimes(p string, fi fs.FileInfo) {
	os.Chtimes(p, atimeOf(fi), fi.ModTime())
}

// parentOf opens the workspace directory that holds p, refusing a
// symlink anywhere on its path, for an operation on p and its siblings
// (the staged and the set-aside names). Done by name, an operation would
// follow a symlink that the host put on the way after the conflict
// check, and write, as root, wherever that leads. A symlink there is a
// host edit.
func (c *ChangeSet) parentOf(p string) (pinnedDir, error) {
	d, err := pinDir(c.real(path.Dir(p)))
	if errors.Is(err, syscall.ELOOP) {
		return d, &hostEdit{path: p}
	}
	if err != nil {
		return d, fmt.Errorf("apply %s: %w", p, err)
	}
	return d, nil
}

// do performs one operation on the workspace, each right after checking
// that its path is still what the conflict check passed (see expect), and
// returns, for a write, the ident of what it placed.
//
// head, for a write of a group (see op.Group) other than its first, is
// what the first placed: the write links its name to that file.
func (c *ChangeSet) do(o op, head *ident) (ident, error) {
	dir, err := c.parentOf(o.Path)
	if err != nil {
		return ident{}, err
	}
	defer dir.Close()
	dst := dir.join(path.Base(o.Path))
	switch o.Op {
	case "mkdir":
		if err := c.unchanged(o, dst); err != nil {
			return ident{}, err
		}
		// mkdir(2) itself refuses a path the host created since.
		if err := os.Mkdir(dst, o.Mode|0o700); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return ident{}, &hostEdit{path: o.Path}
			}
			return ident{}, applyError(o.Path, err)
		}
		chownLike(dst, dir.self())
		return ident{}, chmodOp(o, dst, o.Mode|0o700)
	case "chmod":
		if err := c.unchanged(o, dst); err != nil {
			return ident{}, err
		}
		if o.Was.Mode.IsDir() {
			return ident{}, chmodOp(o, dst, o.Mode|0o700)
		}
		return ident{}, chmodOp(o, dst, o.Mode)
	case "remove":
		// Checked before the rename aside, and again after it on what is
		// aside, which Apply will delete: an edit that came in between (a
		// write through an open file, an entry made below a directory
		// while its digest was computed) is seen, and the rollback puts
		// the entry back. The rename changes the entry's ctime, so the
		// second check leaves that out.
		was := o.Was
		was.Tree = ""
		if now, err := identOf(dst, false); err != nil || now != was {
			if err != nil {
				return ident{}, applyError(o.Path, err)
			}
			return ident{}, &hostEdit{path: o.Path}
		}
		aside := dir.join(path.Base(o.Backup))
		if err := os.Rename(dst, aside); err != nil {
			return ident{}, applyError(o.Path, err)
		}
		now, err := identOf(aside, o.Was.Tree != "")
		now.Ctime = o.Was.Ctime
		if err != nil || now != o.Was {
			return ident{}, &hostEdit{o.Path, true}
		}
		return ident{}, nil
	case "write":
		owner := dir.self()
		if o.Backup != "" {
			owner = dst
		}
		tmp := dir.join(path.Base(o.Tmp))
		check := func() error { return c.unchanged(o, dst) }
		if o.IsLink {
			return place(o.Path, tmp, dst, owner, !o.Was.Exists, check, func(tmp string) error { return os.Symlink(o.Link, tmp) })
		}
		copyUp := func(tmp string) error {
			return overlay.CopyFile(c.upperOf(o.Path), tmp, o.Mode, true)
		}
		if head == nil {
			return place(o.Path, tmp, dst, owner, !o.Was.Exists, check, copyUp)
		}
		hdir, err := c.parentOf(o.Group)
		if err != nil {
			return ident{}, err
		}
		defer hdir.Close()
		// The link takes the owner of the first name's file, which it is.
		return place(o.Path, tmp, dst, "", !o.Was.Exists, check, func(tmp string) error {
			if err := os.Link(hdir.join(path.Base(o.Group)), tmp); err != nil {
				// Another filesystem below the workspace, a link count
				// at its bound, a filesystem without links: a copy.
				if err := copyUp(tmp); err != nil {
					return err
				}
				chownLike(tmp, owner)
				return nil
			}
			// The name may now be another file: the host's, put there
			// since the first write.
			if now, err := identOf(tmp, false); err != nil || now.Dev != head.Dev || now.Ino != head.Ino {
				os.Remove(tmp)
				return &hostEdit{path: o.Group}
			}
			return nil
		})
	}
	return ident{}, fmt.Errorf("apply: unknown operation %q", o.Op)
}

// applyError is err of an operation on the workspace path name, which
// it names: the path an operation used (/proc/self/fd/N/... of a pinned
// directory, a staged name) means nothing to the person reading it.
func applyError(name string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return fmt.Errorf("apply %s: %s: %w", name, pe.Op, pe.Err)
	case errors.As(err, &le):
		return fmt.Errorf("apply %s: %s: %w", name, le.Op, le.Err)
	}
	return fmt.Errorf("apply %s: %w", name, err)
}

// chmodOp gives dst, o's path, mode. A symlink the host put there since
// the check is not followed (as root, it could lead to any file): that is
// a host edit.
func chmodOp(o op, dst string, mode fs.FileMode) error {
	err := chmodNoFollow(dst, mode)
	if errors.Is(err, syscall.ELOOP) {
		return &hostEdit{path: o.Path}
	}
	return err
}

// place makes a new entry at tmp with make, gives it the owner of the
// path owner (when running as root), runs check, and renames it over dst,
// and returns the ident of the new entry. The check comes last, once the
// copy is made, so that only the rename itself follows it. With create
// (dst is expected absent) the rename refuses an existing dst in the same
// step, where the filesystem supports that.
func place(name, tmp, dst, owner string, create bool, check func() error, make func(tmp string) error) (ident, error) {
	os.Remove(tmp)
	if err := make(tmp); err != nil {
		os.Remove(tmp)
		return ident{}, applyError(name, err)
	}
	chownLike(tmp, owner)
	if err := check(); err != nil {
		os.Remove(tmp)
		return ident{}, err
	}
	err := errors.ErrUnsupported
	if create {
		err = renameNoReplace(tmp, dst)
		if errors.Is(err, fs.ErrExist) {
			os.Remove(tmp)
			if cerr := check(); cerr != nil {
				return ident{}, cerr
			}
			return ident{}, applyError(name, err)
		}
	}
	if errors.Is(err, errors.ErrUnsupported) {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return ident{}, applyError(name, err)
	}
	id, err := identOf(dst, false)
	if err != nil {
		return ident{}, applyError(name, err)
	}
	return id, nil
}

// chownLike gives p the owner of like, when moat runs as root: files
// applied to a user's workspace stay that user's.
func chownLike(p, like string) {
	if os.Geteuid() != 0 {
		return
	}
	if fi, err := os.Lstat(like); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			os.Lchown(p, int(st.Uid), int(st.Gid))
		}
	}
}

// undo reverts one operation, whether it completed, half-ran or never ran.
// placed is the ident of what a write placed, nil when unknown (a crash
// before it was journaled). It leaves an entry the host changed after
// Apply wrote it, or created where Apply removed one, and says so (kept):
// that is the newest version of the file, which the rollback must not
// overwrite with the old one or delete.
func (c *ChangeSet) undo(o op, placed *ident) (kept string, err error) {
	dir, err := c.parentOf(o.Path)
	if he := (*hostEdit)(nil); errors.As(err, &he) {
		return "the host put a symlink on its way while apply ran; it is left as it is", nil
	}
	if errors.Is(err, fs.ErrNotExist) && (o.Op != "write" || placed != nil || !o.Was.Exists) {
		// The host removed its directory: what the operation did there
		// went with it.
		if placed != nil {
			return "the host removed its directory after apply wrote it", nil
		}
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer dir.Close()
	dst := dir.join(path.Base(o.Path))
	sibling := func(rel string) string { return dir.join(path.Base(rel)) }
	switch o.Op {
	case "mkdir":
		err := os.Remove(dst)
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return "the host created entries in this directory, which Apply had made; it is left in place", nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	case "chmod":
		err := chmodNoFollow(dst, o.OldMode)
		if errors.Is(err, syscall.ELOOP) {
			return "the host replaced it with a symlink while apply ran; it is left as it is", nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	case "remove":
		if _, err := os.Lstat(sibling(o.Backup)); err == nil {
			err := renameNoReplace(sibling(o.Backup), dst)
			if errors.Is(err, errors.ErrUnsupported) {
				if _, lerr := os.Lstat(dst); lerr == nil {
					err = fs.ErrExist
				} else {
					err = os.Rename(sibling(o.Backup), dst)
				}
			}
			if errors.Is(err, fs.ErrExist) {
				return fmt.Sprintf("the host created it while apply ran; the old one is kept as %s", o.Backup), nil
			}
			return "", err
		}
	case "write":
		os.Remove(sibling(o.Tmp))
		now, err := identOf(dst, false)
		if err != nil {
			return "", err
		}
		if placed != nil && !samePlaced(o, now, *placed) {
			// A rollback cut short may have put the old version back
			// already: that is this one done, not a host edit.
			if o.Backup == "" && !now.Exists || o.Backup != "" && sameEntry(dst, filepath.Join(c.backupDir(), o.Backup)) {
				return "", nil
			}
			return "changed on the host after apply wrote it; the host's version is kept", nil
		}
		if placed == nil && now == o.Was {
			return "", nil // the write never replaced it
		}
		if o.Backup == "" {
			if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", err
			}
			return "", nil
		}
		bak := filepath.Join(c.backupDir(), o.Backup)
		fi, err := os.Lstat(bak)
		if err != nil {
			return "", err
		}
		// Checked again once the old version is copied beside, right
		// before the rename over dst.
		check := func() error {
			if again, err := identOf(dst, false); err != nil || again != now {
				return &hostEdit{path: o.Path}
			}
			return nil
		}
		make := func(tmp string) error {
			if err := overlay.CopyFile(bak, tmp, fi.Mode().Perm(), true); err != nil {
				return err
			}
			keepTimes(tmp, fi)
			return nil
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(bak)
			if err != nil {
				return "", err
			}
			make = func(tmp string) error { return os.Symlink(target, tmp) }
		}
		_, err = place(o.Path, sibling(o.Tmp), dst, dst, false, check, make)
		if he := (*hostEdit)(nil); errors.As(err, &he) {
			return "changed on the host after apply wrote it; the host's version is kept", nil
		}
		return "", err
	}
	return "", nil
}

// rollback undoes operations last..0, then removes the journal. placed
// holds the idents of what the writes placed (see undo). The paths it
// left as the host changed them go to c.kept.
func (c *ChangeSet) rollback(plan []op, last int, placed map[int]ident, before map[int]record) error {
	undone := map[int]bool{}
	// Each operation undone is journaled, so that a rollback cut short
	// and run again skips what it did: undone again, a file it had put
	// back would read as one the host changed after apply wrote it.
	j, _ := os.OpenFile(c.journalPath(), os.O_WRONLY|os.O_APPEND, 0)
	if j != nil {
		defer j.Close()
	}
	for i := min(last, len(plan)-1); i >= 0; i-- {
		kept := ""
		if r, ok := before[i]; ok {
			kept = r.Kept
		} else {
			var p *ident
			if id, ok := placed[i]; ok {
				p = &id
			}
			var err error
			if kept, err = c.undo(plan[i], p); err != nil {
				return fmt.Errorf("roll back %s %s: %w", plan[i].Op, plan[i].Path, err)
			}
			if j != nil {
				if err := (journal{j}).append(record{Undone: &i, Kept: kept}); err != nil {
					return err
				}
			}
			if testHookAfterUndo != nil {
				testHookAfterUndo(i)
			}
		}
		if kept != "" {
			c.kept = append(c.kept, Conflict{Path: plan[i].Path, Reason: "not rolled back: " + kept})
		} else {
			undone[i] = true
		}
	}
	dirs := map[string]bool{}
	for _, o := range plan {
		dirs[path.Dir(o.Path)] = true
	}
	for d := range dirs {
		syncDir(c.real(d))
	}
	// Restoring gave the paths new ctimes: they are Apply's, not the host's.
	// Not so for the paths it never reached or left to the host: settling
	// those would hide a host edit from the next Apply's conflict check.
	if err := c.settle(plan, func(i int) bool { return undone[i] }); err != nil {
		return err
	}
	return c.clearJournal()
}

// finish completes a committed apply: removes what was renamed aside,
// records the ctimes Apply left, and removes the journal.
func (c *ChangeSet) finish(plan []op, placed map[int]ident) error {
	if err := c.seal(plan); err != nil {
		return err
	}
	for _, o := range plan {
		if o.Op != "remove" && o.Op != "write" {
			continue
		}
		// Through the directory itself: a symlink the host put on its
		// way since leaves what is there (the host moved it).
		dir, err := c.parentOf(o.Path)
		if he := (*hostEdit)(nil); errors.As(err, &he) || errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if o.Op == "remove" {
			err = removeAll(dir.join(path.Base(o.Backup)))
		} else {
			os.Remove(dir.join(path.Base(o.Tmp)))
		}
		dir.Close()
		if err != nil {
			return fmt.Errorf("apply: remove %s: %w", o.Backup, err)
		}
	}
	if err := c.settle(plan, func(i int) bool {
		// A file the host changed after Apply wrote it is the host's.
		id, ok := placed[i]
		if plan[i].Op != "write" || !ok {
			return true
		}
		now, err := identOf(c.real(plan[i].Path), false)
		return err == nil && samePlaced(plan[i], now, id)
	}); err != nil {
		return err
	}
	return c.clearJournal()
}

// sealed says whether operation o made or changed a directory whose mode
// leaves its owner unable to write or search it (a Go module cache is
// 0555): Apply gives it its owner's rights while it writes below it,
// since an owner other than root could not, and the mode once it is done
// (seal).
func sealed(o op) bool {
	return (o.Op == "mkdir" || o.Op == "chmod" && o.Was.Mode.IsDir()) && o.Mode.Perm()&0o700 != 0o700
}

// seal gives the directories of plan that Apply kept open to their owner
// (sealed) their modes, deepest first, once every operation is done.
func (c *ChangeSet) seal(plan []op) error {
	for i := len(plan) - 1; i >= 0; i-- {
		o := plan[i]
		if !sealed(o) {
			continue
		}
		dir, err := c.parentOf(o.Path)
		if he := (*hostEdit)(nil); errors.As(err, &he) || errors.Is(err, fs.ErrNotExist) {
			continue // the host moved it: what is there is the host's
		}
		if err != nil {
			return err
		}
		err = chmodNoFollow(dir.join(path.Base(o.Path)), o.Mode)
		dir.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ELOOP) {
			return fmt.Errorf("apply %s: its mode %v: %w", o.Path, o.Mode.Perm(), err)
		}
	}
	return nil
}

// settle records the ctimes Apply left on the paths of plan and their
// ancestors, so that a later Apply does not take them for host edits;
// own(i) says whether the path of operation i holds what Apply left.
func (c *ChangeSet) settle(plan []op, own func(i int) bool) error {
	if c.meta.Baseline.Settled == nil {
		c.meta.Baseline.Settled = map[string]stamp{}
	}
	record := func(p string) {
		if fi, err := os.Lstat(c.real(p)); err == nil && !ctimeOf(fi).before(c.meta.Baseline.Ctime) {
			c.meta.Baseline.Settled[p] = ctimeOf(fi)
		}
	}
	for i, o := range plan {
		if own(i) {
			record(o.Path)
		}
		for a := path.Dir(o.Path); ; a = path.Dir(a) {
			record(a)
			if a == "." {
				break
			}
		}
	}
	return c.save(true)
}

func (c *ChangeSet) clearJournal() error {
	if err := os.RemoveAll(c.backupDir()); err != nil {
		return err
	}
	if err := os.Remove(c.journalPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := syncDir(c.dir); err != nil {
		return err
	}
	c.unmark()
	return nil
}

// recover reads an interrupted journal and finishes (committed) or rolls
// back (not committed) that Apply.
func (c *ChangeSet) recover() error {
	_, err := c.recoverApply()
	return err
}

// recoverApply is recover, and says what it did (see RecoverApply).
func (c *ChangeSet) recoverApply() (string, error) {
	data, err := os.ReadFile(c.journalPath())
	if errors.Is(err, fs.ErrNotExist) {
		return "", os.RemoveAll(c.backupDir()) // a crash before the journal: nothing was touched
	}
	if err != nil {
		return "", fmt.Errorf("apply journal: %w", err)
	}
	var plan []op
	last, committed := -1, false
	placed := map[int]ident{}
	undone := map[int]record{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			break // torn last line
		}
		switch {
		case r.Plan != nil:
			plan = r.Plan
		case r.Done != nil:
			last = *r.Done
			if r.Placed != nil {
				placed[last] = *r.Placed
			}
		case r.Commit:
			committed = true
		case r.Undone != nil:
			undone[*r.Undone] = r
		}
	}
	if committed {
		return ApplyCompleted, c.finish(plan, placed)
	}
	// The operation after the last one journaled may have run, wholly or
	// in part: undo it too.
	if err := c.rollback(plan, last+1, placed, undone); err != nil {
		return ApplyRolledBack, fmt.Errorf("recover apply of %s: %w", c.meta.ID, err)
	}
	return ApplyRolledBack, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// writeFileAtomic replaces path with data (write beside, fsync when
// durable, rename).
func writeFileAtomic(p string, data []byte, perm fs.FileMode, durable bool) error {
	tmp := p + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// sameEntry reports whether the workspace entry at p is what the backup
// bak holds: a symlink to the same target, or a regular file of the same
// permissions and content.
func sameEntry(p, bak string) bool {
	a, err := os.Lstat(p)
	if err != nil {
		return false
	}
	b, err := os.Lstat(bak)
	if err != nil || a.Mode() != b.Mode() {
		return false
	}
	if a.Mode()&fs.ModeSymlink != 0 {
		ta, err1 := os.Readlink(p)
		tb, err2 := os.Readlink(bak)
		return err1 == nil && err2 == nil && ta == tb
	}
	if !a.Mode().IsRegular() {
		return false
	}
	same, err := sameContent(p, bak, a.Size(), b.Size())
	return err == nil && same
}
