//go:build linux

package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/overlay"
)

func TestStateDir(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", "")
	t.Setenv("XDG_STATE_HOME", "/x/state")
	t.Setenv("HOME", "/home/u")
	want := "/x/state/moat"
	if os.Geteuid() == 0 {
		want = "/var/lib/moat"
	}
	if d, err := StateDir(); err != nil || d != want {
		t.Errorf("StateDir() = %q, %v; want %q", d, err, want)
	}
	if os.Geteuid() != 0 {
		t.Setenv("XDG_STATE_HOME", "")
		if d, _ := StateDir(); d != "/home/u/.local/state/moat" {
			t.Errorf("StateDir() without XDG_STATE_HOME = %q", d)
		}
	}
	t.Setenv("MOAT_STATE_DIR", "/s")
	if d, _ := StateDir(); d != "/s" {
		t.Errorf("StateDir() with MOAT_STATE_DIR = %q", d)
	}
}

func TestSessionLifecycle(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	tree(t, ws, map[string]string{"a": "a\n"})
	s := &Store{Dir: filepath.Join(root, "state")}
	c, err := s.Create(ws, "fix-tests")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ws, "fix-tests"); !errors.Is(err, ErrExists) {
		t.Errorf("second Create of a session: %v", err)
	}
	for _, bad := range []string{"a/b", "0123456789ab", ".hidden"} {
		if _, err := s.Create(ws, bad); err == nil {
			t.Errorf("session name %q accepted", bad)
		}
	}
	// Two runs in one session accumulate.
	if err := c.Record([]string{"pip", "install", "x"}, []string{".git/hooks", "deploy"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(c.UpperDir(), "one"), []byte("1\n"), 0o644)
	c2, err := s.Open("fix-tests")
	if err != nil || c2.ID() != c.ID() {
		t.Fatalf("Open by session: %v", err)
	}
	c2.Record([]string{"pytest"}, []string{"deploy", ".envrc"})
	os.WriteFile(filepath.Join(c2.UpperDir(), "two"), []byte("2\n"), 0o644)
	c3, err := s.Open(c.ID())
	if err != nil {
		t.Fatal(err)
	}
	var args [][]string
	for _, cmd := range c3.Info().Commands {
		args = append(args, cmd.Args)
	}
	if want := [][]string{{"pip", "install", "x"}, {"pytest"}}; !reflect.DeepEqual(args, want) {
		t.Errorf("commands %q, want %q", args, want)
	}
	if got, want := c3.Protected(), []string{".git/hooks", "deploy", ".envrc"}; !reflect.DeepEqual(got, want) {
		t.Errorf("protected %q, want the runs' lists merged, %q", got, want)
	}
	changes, _ := c3.Changes()
	if got := summarize(changes); !reflect.DeepEqual(got, []string{"added file one", "added file two"}) {
		t.Errorf("accumulated changes %q", got)
	}
	infos, err := s.List()
	if err != nil || len(infos) != 1 || infos[0].Session != "fix-tests" || infos[0].Size <= 0 {
		t.Fatalf("List: %+v, %v", infos, err)
	}

	// The lock keeps a second user out while a run holds it.
	if err := c.Lock(); err != nil {
		t.Fatal(err)
	}
	if err := c3.Discard(); !errors.Is(err, ErrBusy) {
		t.Errorf("Discard while locked: %v", err)
	}
	c.Unlock()

	// Discard leaves no trace, even of directories a command made unreadable.
	os.MkdirAll(filepath.Join(c.WorkDir(), "work"), 0o755)
	os.Chmod(filepath.Join(c.WorkDir(), "work"), 0)
	os.Mkdir(filepath.Join(c.UpperDir(), "locked"), 0o755)
	os.WriteFile(filepath.Join(c.UpperDir(), "locked", "f"), nil, 0o644)
	os.Chmod(filepath.Join(c.UpperDir(), "locked"), 0)
	if err := c3.Discard(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Dir, "runs"))
	for _, e := range entries {
		if e.Name() != ".lock" {
			t.Errorf("left in the state directory: %s", e.Name())
		}
	}
	if _, err := s.Open("fix-tests"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open after Discard: %v", err)
	}
}

func TestDirSize(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), make([]byte, 10000), 0o644)
	os.Link(filepath.Join(dir, "f"), filepath.Join(dir, "g"))
	n, err := DirSize(dir)
	if err != nil || n < 10000 || n > 20000+8192 {
		t.Errorf("DirSize = %d, %v", n, err)
	}
}

func TestCopyMode(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	tree(t, ws, map[string]string{"a": "a\n", "d/b": "b\n", "d/c": "c\n", "l": "-> a", "ro/": ""})
	os.Chmod(filepath.Join(ws, "ro"), 0o555)
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "ro"), 0o755) })
	s := &Store{Dir: filepath.Join(root, "state")}
	c, err := s.CreateCopy(context.Background(), ws, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	if d := diffManifests(manifest(t, ws, false), manifest(t, c.UpperDir(), false)); d != "" {
		t.Fatalf("copy differs:\n%s", d)
	}
	if changes, _ := c.Changes(); len(changes) != 0 {
		t.Errorf("fresh copy has changes %q", summarize(changes))
	}
	up := c.UpperDir()
	os.WriteFile(filepath.Join(up, "a"), []byte("A\n"), 0o644)
	os.Remove(filepath.Join(up, "d", "b"))
	os.WriteFile(filepath.Join(up, "n"), []byte("n\n"), 0o644)
	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summarize(changes), []string{"modified file a", "deleted file d/b", "added file n"}; !reflect.DeepEqual(got, want) {
		t.Errorf("copy-mode changes %q, want %q", got, want)
	}
	if _, err := c.Apply(nil, nil); err != nil {
		t.Fatal(err)
	}
	if d := diffManifests(manifest(t, up, false), manifest(t, ws, false)); d != "" {
		t.Errorf("after apply:\n%s", d)
	}
}

// TestCopyInterrupted kills CreateCopy (in a re-run of the test binary)
// in the middle of its copy: the change set it leaves must never be read
// as changes, and List removes it.
func TestCopyInterrupted(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("f%02d", i)] = fmt.Sprintf("content %d\n", i)
	}
	tree(t, ws, files)
	before := manifest(t, ws, false)
	s := &Store{Dir: filepath.Join(root, "state")}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MOAT_WS_HELPER=copy", "MOAT_STATE_DIR="+s.Dir, "MOAT_WS_DIR="+ws, "MOAT_WS_COPY_DIE=10")
	if out, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("copy helper did not die mid-copy: %v\n%s", err, out)
	}
	ents, err := os.ReadDir(filepath.Join(s.Dir, "runs"))
	var id string
	for _, e := range ents {
		if isID(e.Name()) {
			id = e.Name()
		}
	}
	if err != nil || id == "" {
		t.Fatalf("the killed copy left no change set: %v %v", ents, err)
	}
	c, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	// What the bug turned into changes: the half-written file, which read
	// as a mode change and, applied, emptied the workspace's file.
	if fi, err := os.Stat(filepath.Join(c.Dir(), "copy", "f09")); err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the helper did not leave a half-written file: %v %v", fi, err)
	}
	if changes, err := c.Changes(); !errors.Is(err, ErrIncomplete) {
		t.Errorf("Changes of an interrupted copy: %q, %v", summarize(changes), err)
	}
	if err := c.WriteDiff(io.Discard, nil, DiffOptions{}); !errors.Is(err, ErrIncomplete) {
		t.Errorf("WriteDiff of an interrupted copy: %v", err)
	}
	if rep, err := c.Apply(nil, []string{"."}); !errors.Is(err, ErrIncomplete) || len(rep.Applied) > 0 {
		t.Errorf("Apply of an interrupted copy: %+v, %v", rep, err)
	}
	if d := diffManifests(before, manifest(t, ws, false)); d != "" {
		t.Fatalf("the workspace changed:\n%s", d)
	}
	// Held (as CreateCopy holds it while copying), it is listed as a copy
	// in progress; released, as one whose process died, and removed.
	held, _ := s.Open(id)
	if err := held.Lock(); err != nil {
		t.Fatal(err)
	}
	infos, err := s.List()
	if err != nil || len(infos) != 1 || !infos[0].Incomplete {
		t.Errorf("List with the copy in progress: %+v, %v", infos, err)
	}
	held.Unlock()
	if infos, err := s.List(); err != nil || len(infos) != 0 {
		t.Errorf("List after the copy died: %+v, %v", infos, err)
	}
	if _, err := os.Lstat(c.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the interrupted copy was not removed: %v", err)
	}
	if _, err := s.Open("sess"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the interrupted copy's session: %v", err)
	}

	// Positive control: the helper, not reaching the file to die at,
	// makes a whole copy in the same session, which applies.
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MOAT_WS_HELPER=copy", "MOAT_STATE_DIR="+s.Dir, "MOAT_WS_DIR="+ws, "MOAT_WS_COPY_DIE=1000")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("copy helper: %v\n%s", err, out)
	}
	c, err = s.Open("sess")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(c.Dir(), "copy")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("copy/ left after a whole copy: %v", err)
	}
	if changes, err := c.Changes(); err != nil || len(changes) != 0 {
		t.Fatalf("a whole copy: %q, %v", summarize(changes), err)
	}
	os.WriteFile(filepath.Join(c.UpperDir(), "f09"), []byte("new\n"), 0o644)
	if rep, err := c.Apply(nil, nil); err != nil || len(rep.Applied) != 1 {
		t.Fatalf("apply of a whole copy: %+v, %v", rep, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f09")); string(b) != "new\n" {
		t.Errorf("f09 after apply: %q", b)
	}
}

// TestMergeInterrupted: a change set whose upper layer carries the mark of
// a merge that did not finish (see overlay.MergeXattr) is refused by
// Changes, WriteDiff and Apply, and kept by List (it holds earlier runs'
// changes); unmarked, the same set applies (the positive control).
func TestMergeInterrupted(t *testing.T) {
	s, c := newSet(t, map[string]string{"a": "a\n", "d/b": "b\n"})
	ws := c.Workspace()
	before := manifest(t, ws, false)
	tree(t, c.UpperDir(), map[string]string{"a": "A\n"})
	whiteout(t, filepath.Join(c.UpperDir(), "d"))
	if err := unix.Setxattr(c.UpperDir(), overlay.MergeXattr, []byte("y"), 0); err != nil {
		t.Skipf("setxattr %s: %v (the filesystem of the temporary directory lacks user xattrs)", overlay.MergeXattr, err)
	}
	if changes, err := c.Changes(); !errors.Is(err, ErrIncomplete) {
		t.Errorf("Changes of a half-merged set: %q, %v", summarize(changes), err)
	}
	if err := c.WriteDiff(io.Discard, nil, DiffOptions{}); !errors.Is(err, ErrIncomplete) {
		t.Errorf("WriteDiff of a half-merged set: %v", err)
	}
	if rep, err := c.Apply(nil, []string{"."}); !errors.Is(err, ErrIncomplete) || len(rep.Applied) > 0 {
		t.Errorf("Apply of a half-merged set: %+v, %v", rep, err)
	}
	if d := diffManifests(before, manifest(t, ws, false)); d != "" {
		t.Fatalf("the workspace changed:\n%s", d)
	}
	if infos, err := s.List(); err != nil || len(infos) != 1 || !infos[0].Merging {
		t.Errorf("List: %+v, %v", infos, err)
	}
	if err := unix.Removexattr(c.UpperDir(), overlay.MergeXattr); err != nil {
		t.Fatal(err)
	}
	if rep, err := c.Apply(nil, nil); err != nil || len(rep.Applied) != 2 {
		t.Fatalf("Apply of the set once merged: %+v, %v", rep, err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "d")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("d after apply: %v", err)
	}
}

// TestCopyBounded: a copy given a bound stops at the first file that
// would take it past the bound, before copying that file or any after
// it, and leaves nothing in the state directory; ErrCopyTooLarge says
// why. The positive control: the same workspace copies whole under a
// bound it fits.
func TestCopyBounded(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("f%02d", i)] = strings.Repeat("x", 1000)
	}
	tree(t, ws, files)
	s := &Store{Dir: filepath.Join(root, "state")}
	copied := 0
	testHookCopyFile = func(string) { copied++ }
	t.Cleanup(func() { testHookCopyFile = nil })

	_, err := s.CreateCopy(context.Background(), ws, "", 5500)
	if !errors.Is(err, ErrCopyTooLarge) {
		t.Fatalf("a copy over its bound: %v", err)
	}
	// Five files fit; the sixth is opened, found too large and not copied.
	if copied != 6 {
		t.Errorf("the copy went on to %d files after its bound", copied)
	}
	if sets, _ := filepath.Glob(filepath.Join(s.Dir, "*", "*")); len(sets) != 0 {
		t.Errorf("a refused copy left %q", sets)
	}

	copied = 0
	c, err := s.CreateCopy(context.Background(), ws, "", 20000)
	if err != nil {
		t.Fatalf("a copy within its bound: %v", err)
	}
	defer c.Discard()
	if sets, _ := filepath.Glob(filepath.Join(s.Dir, "*", "*")); len(sets) == 0 {
		t.Error("the state directory's glob finds no change set: it proves nothing above")
	}
	if copied != 20 {
		t.Errorf("copied %d files", copied)
	}
	if d := diffManifests(manifest(t, ws, false), manifest(t, c.UpperDir(), false)); d != "" {
		t.Fatalf("copy differs:\n%s", d)
	}
}

// TestCopyBoundedEntries: empty files and directories take no bytes, but
// each takes an inode: a copy given a bound holds no more entries than
// the disk limit's tmpfs of that size holds inodes, so that a workspace
// of countless empty entries is refused as one of too many bytes is,
// and leaves nothing behind. The positive control: as many entries as
// the tmpfs holds, under the same bound, copy whole.
func TestCopyBoundedEntries(t *testing.T) {
	const bound = 1 << 20
	n := int(backend.TmpfsInodes(bound))
	make := func(ws string, entries int) {
		if err := os.MkdirAll(filepath.Join(ws, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		// The root and d are two entries; half the rest empty files,
		// half empty directories.
		for i := range entries - 2 {
			p := filepath.Join(ws, "d", fmt.Sprint(i))
			var err error
			if i%2 == 0 {
				err = os.WriteFile(p, nil, 0o644)
			} else {
				err = os.Mkdir(p, 0o755)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	root := t.TempDir()
	s := &Store{Dir: filepath.Join(root, "state")}

	over := filepath.Join(root, "over")
	make(over, n+1)
	_, err := s.CreateCopy(context.Background(), over, "", bound)
	if !errors.Is(err, ErrCopyTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("over %d files, directories and links", n)) {
		t.Fatalf("a copy of %d empty entries under a bound of %d: %v", n+1, n, err)
	}
	if sets, _ := filepath.Glob(filepath.Join(s.Dir, "*", "*")); len(sets) != 0 {
		t.Errorf("a refused copy left %q", sets)
	}

	fits := filepath.Join(root, "fits")
	make(fits, n)
	c, err := s.CreateCopy(context.Background(), fits, "", bound)
	if err != nil {
		t.Fatalf("control: a copy of %d empty entries under a bound of %d: %v", n, n, err)
	}
	defer c.Discard()
	if d := diffManifests(manifest(t, fits, false), manifest(t, c.UpperDir(), false)); d != "" {
		t.Fatalf("copy differs:\n%s", d)
	}
}

// TestDiscardCutShort: a discard that dies part way through removing a
// change set leaves nothing that lists or applies as one: the set leaves
// its name in one step before its files go, and what a discard cut short
// left is removed by the next listing. (Before, the rest of the set kept
// its name, and moat apply applied the part the removal had not reached,
// tried.) The control: before the discard the set lists.
func TestDiscardCutShort(t *testing.T) {
	s, c := newSet(t, map[string]string{"a": "x"})
	for i := 0; i < 50; i++ {
		os.WriteFile(filepath.Join(c.UpperDir(), fmt.Sprintf("f%d", i)), []byte("y"), 0o644)
	}
	if infos, err := s.List(); err != nil || len(infos) != 1 {
		t.Fatalf("control: List %+v %v", infos, err)
	}
	// What a discard killed after its rename and part of the removal
	// leaves.
	runs := filepath.Join(s.Dir, "runs")
	trash := filepath.Join(runs, discardPrefix+c.ID())
	if err := os.Rename(filepath.Join(runs, c.ID()), trash); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 25; i++ {
		os.Remove(filepath.Join(trash, "upper", fmt.Sprintf("f%d", i)))
	}
	if infos, err := s.List(); err != nil || len(infos) != 0 {
		t.Errorf("List after a cut-short discard: %+v %v", infos, err)
	}
	if _, err := os.Lstat(trash); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("what the discard left is still there: %v", err)
	}
	// A whole discard goes the same way.
	_, c2 := newSet(t, map[string]string{"b": "x"})
	os.WriteFile(filepath.Join(c2.UpperDir(), "g"), []byte("y"), 0o644)
	if err := c2.Discard(); err != nil {
		t.Fatal(err)
	}
}

// TestAbandonedEmptySetsGo: an overlay change set of no name that nobody
// holds and whose upper layer is empty (a run killed before its command
// wrote anything; its command is recorded as it starts) is removed by a
// listing once it is a minute old, as is a directory whose process died
// before it became a change set; before, both stayed for good, and the
// empty set was the latest that diff and apply picked. The controls: a
// young one, one holding a change, one a run holds, and a named one
// (--session, a daemon session's) stay.
func TestAbandonedEmptySetsGo(t *testing.T) {
	s, old := newSet(t, nil)
	backdate := func(c *ChangeSet) {
		c.meta.Created = time.Now().Add(-2 * abandonedAge)
		if err := c.save(false); err != nil {
			t.Fatal(err)
		}
	}
	backdate(old)
	mk := func() *ChangeSet {
		c, err := s.Create(old.Workspace(), "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	young := mk()
	changed := mk()
	backdate(changed)
	os.WriteFile(filepath.Join(changed.UpperDir(), "f"), []byte("x"), 0o644)
	held := mk()
	backdate(held)
	if err := held.Lock(); err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	// A run's command is recorded as it starts: killed, it leaves a set
	// with a command and nothing changed, which goes too.
	ran := mk()
	if err := ran.Record([]string{"sleep", "20"}, nil); err != nil {
		t.Fatal(err)
	}
	backdate(ran)
	named, err := s.Create(old.Workspace(), "keep-me")
	if err != nil {
		t.Fatal(err)
	}
	backdate(named)
	bare := filepath.Join(s.Dir, "runs", "0123456789ab")
	os.Mkdir(bare, 0o700)
	past := time.Now().Add(-2 * abandonedAge)
	os.Chtimes(bare, past, past)

	got := listedIDs(t, s)
	want := []string{young.ID(), changed.ID(), held.ID(), named.ID()}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("listed %q, want %q (not the abandoned empty %s)", got, want, old.ID())
	}
	if _, err := os.Stat(bare); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the bare directory of a dead process stays: %v", err)
	}
}

// listedIDs are the ids of the change sets s lists, sorted.
func listedIDs(t *testing.T, s *Store) []string {
	t.Helper()
	infos, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range infos {
		ids = append(ids, i.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestAbandonedCopySetsGo: a copy change set of no name that nobody
// holds, a minute old, whose copy differs from the workspace in nothing
// (a copy run killed before its command changed anything) is removed by a
// listing; before, the whole copy stayed for good. The controls: one
// whose copy holds a change stays, marked so that later listings do not
// compare it again, and a young one stays.
func TestAbandonedCopySetsGo(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	tree(t, ws, map[string]string{"a": "1", "d/b": "2"})
	s := &Store{Dir: filepath.Join(root, "state")}
	mk := func(old bool) *ChangeSet {
		c, err := s.CreateCopy(context.Background(), ws, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Record([]string{"sleep", "20"}, nil); err != nil {
			t.Fatal(err)
		}
		if old {
			c.meta.Created = time.Now().Add(-2 * abandonedAge)
			if err := c.save(false); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	unchanged, changed, young := mk(true), mk(true), mk(false)
	if err := os.WriteFile(filepath.Join(changed.UpperDir(), "a"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{changed.ID(), young.ID()}
	slices.Sort(want)
	if got := listedIDs(t, s); !slices.Equal(got, want) {
		t.Errorf("listed %q, want %q (not the abandoned unchanged %s)", got, want, unchanged.ID())
	}
	if _, err := os.Stat(unchanged.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the unchanged copy stays: %v", err)
	}
	if _, err := os.Stat(filepath.Join(changed.Dir(), keptMarker)); err != nil {
		t.Errorf("the changed copy is not marked: %v", err)
	}
	if got := listedIDs(t, s); !slices.Equal(got, want) {
		t.Errorf("listed again %q, want %q", got, want)
	}
}

// TestStickyDirectoryKept: a directory's sticky bit (a shared tmp/) is
// copied into a copy-mode workspace, is a mode change the review shows,
// and is given to the directory apply creates or changes.
func TestStickyDirectoryKept(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	tree(t, ws, map[string]string{"shared/": "", "plain/": ""})
	if err := os.Chmod(filepath.Join(ws, "shared"), 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(ws, "plain"), 0o755)
	s := &Store{Dir: filepath.Join(root, "state")}
	c, err := s.CreateCopy(context.Background(), ws, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	up := c.UpperDir()
	if fi, err := os.Stat(filepath.Join(up, "shared")); err != nil || fi.Mode()&fs.ModeSticky == 0 {
		t.Fatalf("the copy's shared/ lost its sticky bit: %v %v", fi.Mode(), err)
	}
	if changes, _ := c.Changes(); len(changes) != 0 {
		t.Fatalf("fresh copy has changes %q", summarize(changes))
	}
	os.Mkdir(filepath.Join(up, "new"), 0o700)
	os.Chmod(filepath.Join(up, "new"), 0o1777|fs.ModeSticky)
	os.Chmod(filepath.Join(up, "plain"), 0o755|fs.ModeSticky)
	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summarize(changes), []string{"added dir new", "mode dir plain"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("changes %q, want %q", got, want)
	}
	var buf bytes.Buffer
	if err := c.WriteDiff(&buf, changes, DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "755 -> 1755") {
		t.Errorf("the review does not show the sticky bit:\n%s", buf.String())
	}
	buf.Reset()
	if err := c.WriteDiff(&buf, changes, DiffOptions{Format: JSON}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"mode": "1777"`) {
		t.Errorf("the JSON review does not show new/ as 1777:\n%s", buf.String())
	}
	if _, err := c.Apply(nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"new", "plain", "shared"} {
		if fi, err := os.Stat(filepath.Join(ws, p)); err != nil || fi.Mode()&fs.ModeSticky == 0 {
			t.Errorf("after apply, %s is %v (%v): the sticky bit was dropped", p, fi.Mode(), err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(ws, "new")); fi.Mode().Perm() != 0o777 {
		t.Errorf("control: new/ has mode %v", fi.Mode())
	}
}

// TestCopyModeLeavesFIFOsOut: a FIFO the workspace holds is not copied,
// and so is no deletion in the copy's changes. The control: a file the
// command removes is one.
func TestCopyModeLeavesFIFOsOut(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	tree(t, ws, map[string]string{"a": "a\n", "d/b": "b\n"})
	for _, p := range []string{"fifo", "d/fifo"} {
		if err := unix.Mkfifo(filepath.Join(ws, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &Store{Dir: filepath.Join(root, "state")}
	c, err := s.CreateCopy(context.Background(), ws, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	if _, err := os.Lstat(filepath.Join(c.UpperDir(), "fifo")); !os.IsNotExist(err) {
		t.Fatalf("the FIFO was copied: %v", err)
	}
	os.Remove(filepath.Join(c.UpperDir(), "a"))
	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summarize(changes), []string{"deleted file a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
}

// TestCreateSweepsUnmade: the directory a killed moat left before it
// wrote its change set's meta.json goes with the next Create, once old
// enough; a young one (being made now) stays.
func TestCreateSweepsUnmade(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	tree(t, ws, map[string]string{"a": "a\n"})
	s := &Store{Dir: filepath.Join(root, "state")}
	runs := filepath.Join(s.Dir, "runs")
	old, young := filepath.Join(runs, "0123456789ab"), filepath.Join(runs, "ba9876543210")
	for _, d := range []string{old, young} {
		if err := os.MkdirAll(filepath.Join(d, "upper"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * abandonedAge)
	os.Chtimes(old, past, past)
	c, err := s.Create(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old unmade directory stays: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("control: the young one was removed: %v", err)
	}
}

// TestRootModeChangeIsNotEmpty: a change set whose only change is the
// workspace root's mode (chmod 750 .) is kept by DiscardIfEmpty, as
// Changes lists it (it was discarded as empty, found by a tester); the
// control: one with no change at all is discarded.
func TestRootModeChangeIsNotEmpty(t *testing.T) {
	for _, chmod := range []bool{true, false} {
		_, c := newSet(t, map[string]string{"a": "a\n"})
		if chmod {
			fi, err := os.Stat(c.Workspace())
			if err != nil {
				t.Fatal(err)
			}
			os.Chmod(c.UpperDir(), fi.Mode().Perm()&^0o027)
		}
		gone, err := c.DiscardIfEmpty()
		if err != nil || gone == chmod {
			t.Errorf("root mode changed %v: discarded %v (%v)", chmod, gone, err)
		}
	}
}

// TestDropUnsavedRun: a set whose last run ended before its changes were
// saved (the pending mark: the OOM killer took moat's init first) kept
// every earlier change of the session locked away, refused by diff and
// apply, while moat said they were kept (found by a tester). Once that
// run has ended, the mark goes and the earlier changes apply. The
// control: a set whose merge began ("y") keeps its mark and its refusal.
func TestDropUnsavedRun(t *testing.T) {
	for _, mark := range []string{overlay.MergePending, "y"} {
		_, c := newSet(t, map[string]string{"a": "a\n"})
		tree(t, c.UpperDir(), map[string]string{"a": "A\n"})
		if err := unix.Setxattr(c.UpperDir(), overlay.MergeXattr, []byte(mark), 0); err != nil {
			t.Skipf("setxattr %s: %v (the filesystem of the temporary directory lacks user xattrs)", overlay.MergeXattr, err)
		}
		lost, err := c.DropUnsavedRun()
		if err != nil || lost != (mark == overlay.MergePending) {
			t.Fatalf("mark %q: DropUnsavedRun = %v, %v", mark, lost, err)
		}
		rep, err := c.Apply(nil, nil)
		if mark == overlay.MergePending {
			if err != nil || len(rep.Applied) != 1 {
				t.Errorf("the earlier change after an unsaved run: %+v, %v", rep, err)
			}
			continue
		}
		if !errors.Is(err, ErrIncomplete) {
			t.Errorf("control: a half-merged set applied: %+v, %v", rep, err)
		}
	}
}

// TestCreateCopyCancelled: a copy whose context ends while it copies
// (a run interrupted as it sets up) stops there, returns the context's
// error and leaves no change set. The control: the same copy, not
// cancelled, is whole.
func TestCreateCopyCancelled(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	tree(t, ws, map[string]string{"a": "1", "b": "2", "c/d": "3"})
	s := &Store{Dir: filepath.Join(root, "state")}
	ctx, cancel := context.WithCancel(context.Background())
	copied := 0
	testHookCopyFile = func(string) {
		if copied++; copied == 1 {
			cancel()
		}
	}
	defer func() { testHookCopyFile = nil }()
	if _, err := s.CreateCopy(ctx, ws, "", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled copy: %v", err)
	}
	if copied != 1 {
		t.Errorf("the copy went on for %d files after the cancel", copied-1)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir, "runs")); len(ents) != 0 {
		t.Errorf("a cancelled copy left %v", ents)
	}
	c, err := s.CreateCopy(context.Background(), ws, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(c.UpperDir(), "c", "d")); string(b) != "3" {
		t.Errorf("control: the copy's c/d is %q", b)
	}
}
