package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// An apply killed outright (SIGKILL, a crash, the power) leaves the
// workspace part applied, with its journal in the change set saying how
// to finish or undo it (recover). Until the change set is next applied,
// discarded or listed, the workspace is a tree nobody made, and a run
// started in it would work on it, an overlay's change set be based on
// it. So Apply marks the workspace, by device and inode, in the store
// (applying/DEV-INO/ID, one mark per change set, so that another change
// set's apply into the same workspace neither replaces nor removes it)
// while its journal exists, and RecoverApplyInto, which every run and
// session start calls, and Apply itself, finish or roll back first each
// apply a mark names. (A mark of an older moat is the file
// applying/DEV-INO, naming its change set: read as one.)

// markPath is where c's apply marks its workspace; "" for a change set
// made before moat kept the workspace's identity.
func (c *ChangeSet) markPath() string {
	if c.meta.WorkspaceIno == 0 {
		return ""
	}
	return filepath.Join(c.storeDir(), "applying", fmt.Sprintf("%d-%d", c.meta.WorkspaceDev, c.meta.WorkspaceIno), c.meta.ID)
}

// storeDir is the state directory c is kept in.
func (c *ChangeSet) storeDir() string {
	return filepath.Dir(filepath.Dir(c.dir)) // <store>/runs/<id>
}

// mark records that c's apply is under way, durably, before its journal
// is written.
func (c *ChangeSet) mark() error {
	p := c.markPath()
	if p == "" {
		return nil
	}
	var f *os.File
	var err error
	for try := 0; try < 3; try++ {
		// Another apply's unmark may remove the directory, empty, between
		// the two steps: made again then.
		if err = os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("apply: mark the workspace: %w", err)
		}
		if f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("apply: mark the workspace: %w", err)
	}
	_, err = f.WriteString(c.meta.ID + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(filepath.Dir(p))
	}
	if err == nil {
		err = syncDir(filepath.Dir(filepath.Dir(p)))
	}
	if err != nil {
		return fmt.Errorf("apply: mark the workspace: %w", err)
	}
	return nil
}

// unmark removes c's mark, once its journal is gone; another change
// set's is left.
func (c *ChangeSet) unmark() {
	p := c.markPath()
	if p == "" {
		return
	}
	os.Remove(p)
	// Gone once empty, so that a run's look for marks stays one lstat
	// (RecoverApplyInto); a mark made meanwhile keeps them.
	os.Remove(filepath.Dir(p))
	os.Remove(filepath.Dir(filepath.Dir(p)))
}

// readMark reads the mark at p, refusing a link or anything but a small
// regular file (it never waits on a FIFO).
func readMark(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > 64 {
		return nil, errors.New("not a mark")
	}
	b := make([]byte, 64)
	n, _ := f.Read(b)
	return b[:n], nil
}

// RecoverApplyInto finishes or rolls back an apply into the workspace
// ws that was killed before its end (see markPath), and says what it
// did, "" when there was none. An apply under way in a live process is
// left to it. It is an error only when the interrupted apply can be
// neither finished nor rolled back: a run must not start in a tree half
// applied.
func RecoverApplyInto(ws string) (string, error) {
	d, err := stateDirPath()
	if err != nil {
		return "", nil
	}
	return recoverApplyUnder(d, ws, "")
}

// recoverApplyUnder is RecoverApplyInto in the state directory d,
// leaving alone the change set except (the caller's own, "" for none).
func recoverApplyUnder(d, ws, except string) (string, error) {
	if _, err := os.Lstat(filepath.Join(d, "applying")); err != nil {
		return "", nil // no apply under way: one look
	}
	// The apply may have been into a directory above ws: a run in a
	// subdirectory of a half-applied tree is in it too (found by a
	// tester).
	var said []string
	for dir := filepath.Clean(ws); ; dir = filepath.Dir(dir) {
		s, err := recoverApplyAt(d, dir, except)
		if err != nil {
			return "", err
		}
		if s != "" {
			said = append(said, s)
		}
		if dir == "/" || dir == "." {
			break
		}
	}
	// And into a directory below ws: a run of ws sees that tree too
	// (found by a tester). The marks are few: each names its change
	// set, which names its workspace.
	below, err := marksBelow(d, filepath.Clean(ws))
	if err != nil {
		return "", err
	}
	for _, dir := range below {
		s, err := recoverApplyAt(d, dir, except)
		if err != nil {
			return "", err
		}
		if s != "" {
			said = append(said, s)
		}
	}
	return strings.Join(said, "; "), nil
}

// marksBelow returns the workspaces below ws (not ws) that an apply
// marked in the state directory d names.
func marksBelow(d, ws string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(d, "applying"))
	if err != nil {
		return nil, nil
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range ents {
		p := filepath.Join(d, "applying", e.Name())
		var ids []string
		if e.IsDir() {
			marks, _ := os.ReadDir(p)
			for _, m := range marks {
				ids = append(ids, m.Name())
			}
		} else if data, err := readMark(p); err == nil {
			ids = append(ids, strings.TrimSpace(string(data)))
		}
		for _, id := range ids {
			if !isID(id) {
				continue
			}
			c, err := (&Store{Dir: d}).Open(id)
			if err != nil {
				continue
			}
			w := filepath.Clean(c.meta.Workspace)
			if rel, err := filepath.Rel(ws, w); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	return out, nil
}

// recoverApplyAt is RecoverApplyInto for the applies marked for the
// directory ws exactly, in the state directory d, but except's.
func recoverApplyAt(d, ws, except string) (string, error) {
	fi, err := os.Stat(ws)
	if err != nil {
		return "", nil
	}
	_, dev, ino, _ := blocksOf(fi)
	marks := filepath.Join(d, "applying", fmt.Sprintf("%d-%d", dev, ino))
	mfi, err := os.Lstat(marks)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err := checkStateDir(d); err != nil {
		return "", err
	}
	if err == nil && !mfi.IsDir() {
		// An older moat's one mark.
		return recoverMark(d, marks, "", except, ws, dev, ino)
	}
	ents, err := os.ReadDir(marks)
	if err != nil {
		return "", nil
	}
	var said []string
	for _, e := range ents {
		s, err := recoverMark(d, filepath.Join(marks, e.Name()), e.Name(), except, ws, dev, ino)
		if err != nil {
			return "", err
		}
		if s != "" {
			said = append(said, s)
		}
	}
	os.Remove(marks) // once empty
	return strings.Join(said, "; "), nil
}

// recoverMark finishes or rolls back the apply the mark at path names
// (name, its file's name, is the change set's ID; "" for an older moat's
// mark, which names it in its content alone), unless it is except's.
func recoverMark(d, path, name, except, ws string, dev, ino uint64) (string, error) {
	data, err := readMark(path)
	id := strings.TrimSpace(string(data))
	if err != nil || !isID(id) || name != "" && name != id {
		os.Remove(path)
		return "", nil
	}
	if id == except {
		return "", nil
	}
	c, err := (&Store{Dir: d}).Open(id)
	if err != nil || c.meta.WorkspaceDev != dev || c.meta.WorkspaceIno != ino {
		os.Remove(path) // its change set is gone, or is another workspace's
		return "", nil
	}
	if _, err := os.Lstat(c.journalPath()); errors.Is(err, fs.ErrNotExist) {
		os.Remove(path)
		return "", nil
	}
	err = c.Recover()
	switch {
	case errors.Is(err, ErrBusy):
		return "", nil // the apply is alive
	case err != nil:
		return "", fmt.Errorf("an apply of change set %s into %s was interrupted and cannot be finished or rolled back: %w; run `moat apply %s` or `moat discard %s`", id, ws, err, id, id)
	}
	if name == "" {
		os.Remove(path) // an older moat's mark: c's unmark looked elsewhere
	}
	return fmt.Sprintf("an apply of change set %s into %s was interrupted (moat was killed): it was finished or rolled back before this, so the workspace holds all of its changes or none", id, ws), nil
}
