//go:build linux

package workspace

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// handMade is a change set with one change of each kind, made by hand.
func handMade(t *testing.T) (*Store, *ChangeSet, map[string]string) {
	t.Helper()
	s, c := newSet(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.sh": "c\n", "old/x": "x\n", "l": "-> a.txt", "keep": "k\n"})
	up := c.UpperDir()
	tree(t, up, map[string]string{"a.txt": "A\n", "c.sh#755": "c\n", "l": "-> b.txt", "new/n.txt": "n\n", "new/e/": "", "z.txt": "z\n"})
	whiteout(t, filepath.Join(up, "old"))
	whiteout(t, filepath.Join(up, "b.txt"))
	merged := map[string]string{}
	for k, v := range manifest(t, c.Workspace(), false) {
		merged[k] = v
	}
	delete(merged, "old")
	delete(merged, "old/x")
	delete(merged, "b.txt")
	for k, v := range manifest(t, up, false) {
		if k != "old" && k != "b.txt" {
			merged[k] = v
		}
	}
	return s, c, merged
}

func TestApply(t *testing.T) {
	_, c, merged := handMade(t)
	rep, err := c.Apply(nil, nil)
	if err != nil {
		t.Fatalf("apply: %v %+v", err, rep)
	}
	if d := diffManifests(merged, manifest(t, c.Workspace(), false)); d != "" {
		t.Errorf("workspace after apply:\n%s", d)
	}
	if len(rep.Applied) != 9 {
		t.Errorf("applied %q", summarize(rep.Applied))
	}
	leftovers, _ := filepath.Glob(filepath.Join(c.Workspace(), ".moat-*"))
	if _, err := os.Lstat(c.journalPath()); err == nil || len(leftovers) > 0 {
		t.Errorf("journal or %v left behind", leftovers)
	}
}

func TestApplySelectedPaths(t *testing.T) {
	_, c, merged := handMade(t)
	if _, err := c.Apply([]string{"new/n.txt", filepath.Join(c.Workspace(), "z.txt")}, nil); err != nil {
		t.Fatal(err)
	}
	got := manifest(t, c.Workspace(), false)
	if got["new/n.txt"] != merged["new/n.txt"] || got["z.txt"] != merged["z.txt"] || got["a.txt"] == merged["a.txt"] {
		t.Errorf("selected apply: %v", got)
	}
	if _, err := c.Apply([]string{"nope"}, nil); err == nil {
		t.Error("apply of a path without a change succeeded")
	}
	// An empty path (a script's unset variable) selects or forces
	// nothing, rather than the whole workspace, which path.Clean makes
	// of it (found by a tester).
	before := manifest(t, c.Workspace(), false)
	if _, err := c.Apply([]string{""}, nil); !errors.Is(err, ErrEmptyPath) {
		t.Errorf("apply of an empty path: %v", err)
	}
	if _, err := c.Apply([]string{"a.txt"}, []string{""}); !errors.Is(err, ErrEmptyPath) {
		t.Errorf("apply forcing an empty path: %v", err)
	}
	if _, err := c.Preview(nil, []string{""}); !errors.Is(err, ErrEmptyPath) {
		t.Errorf("preview forcing an empty path: %v", err)
	}
	if d := diffManifests(before, manifest(t, c.Workspace(), false)); d != "" {
		t.Errorf("an empty path applied:\n%s", d)
	}
	// The rest applies later without the first Apply's own changes
	// counting as host edits.
	if rep, err := c.Apply(nil, nil); err != nil {
		t.Fatalf("second apply: %v %+v", err, rep.Conflicts)
	}
	if d := diffManifests(merged, manifest(t, c.Workspace(), false)); d != "" {
		t.Errorf("workspace after both applies:\n%s", d)
	}
}

func TestApplyRefusesHostEdits(t *testing.T) {
	_, c, merged := handMade(t)
	ws := c.Workspace()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("host edit\n"), 0o644)
	os.Remove(filepath.Join(ws, "l"))
	os.WriteFile(filepath.Join(ws, "old", "host-new"), []byte("h\n"), 0o644)
	before := manifest(t, ws, false)
	rep, err := c.Apply(nil, nil)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("apply over host edits: %v", err)
	}
	var paths []string
	for _, cf := range rep.Conflicts {
		paths = append(paths, cf.Path)
	}
	// Removing l changed the workspace's root directory, so the files the
	// change set adds there might have been deleted on the host too: moat
	// cannot tell without a listing, and refuses them as well.
	if want := []string{"a.txt", "l", "new", "new/e", "new/n.txt", "old", "z.txt"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("conflicts %+v, want paths %q", rep.Conflicts, want)
	}
	if d := diffManifests(before, manifest(t, ws, false)); d != "" {
		t.Errorf("a refused apply changed the workspace:\n%s", d)
	}
	if _, err := c.Apply(nil, []string{"."}); err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if got := manifest(t, ws, false); got["a.txt"] != merged["a.txt"] || got["l"] != merged["l"] {
		t.Errorf("forced apply: %v", got)
	}
}

// TestApplyCrash kills Apply after each operation in turn (in a re-run
// of the test binary) and checks Recover leaves the old or the new state.
// crashAfter applies c in a helper process that dies right after
// operation after, and says whether it died so; false when the apply
// finished first (past its last operation and the commit). A plan of
// fewer than 5 operations is too short to test.
func crashAfter(t *testing.T, s *Store, c *ChangeSet, after int) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MOAT_WS_HELPER=crash", "MOAT_STATE_DIR="+s.Dir, "MOAT_WS_ID="+c.ID(),
		"MOAT_WS_CRASH_AFTER="+strconv.Itoa(after))
	out, err := cmd.CombinedOutput()
	if err == nil {
		if after < 5 {
			t.Fatalf("Apply finished before operation %d: the plan is too short to test", after)
		}
		return false
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("crash helper: %v\n%s", err, out)
	}
	return true
}

func TestApplyCrash(t *testing.T) {
	for after := 0; ; after++ {
		s, c, merged := handMade(t)
		orig := manifest(t, c.Workspace(), false)
		if !crashAfter(t, s, c, after) {
			break
		}
		c, err := s.Open(c.ID())
		if err != nil {
			t.Fatal(err)
		}
		if !c.Info().PendingApply {
			t.Fatalf("after a crash at %d: no pending apply", after)
		}
		if _, err := c.Changes(); !errors.Is(err, ErrPendingApply) {
			t.Errorf("Changes with a pending apply: %v", err)
		}
		if err := c.Recover(); err != nil {
			t.Fatalf("recover after a crash at %d: %v", after, err)
		}
		got := manifest(t, c.Workspace(), false)
		if diffManifests(orig, got) != "" && diffManifests(merged, got) != "" {
			t.Fatalf("crash after operation %d left a mix:\nvs old:\n%s\nvs new:\n%s", after,
				diffManifests(orig, got), diffManifests(merged, got))
		}
		if _, err := c.Apply(nil, nil); err != nil {
			t.Fatalf("apply after recovering from a crash at %d: %v", after, err)
		}
		if d := diffManifests(merged, manifest(t, c.Workspace(), false)); d != "" {
			t.Fatalf("apply after recovering from a crash at %d:\n%s", after, d)
		}
	}
}

// TestApplyAfterCrashSaysSo: an apply killed part way is rolled back by
// the change set's next apply, which says so in its report before it
// applies (found by a tester: it said nothing, though the workspace had
// been half written); an apply with nothing to recover says nothing (the
// positive control).
func TestApplyAfterCrashSaysSo(t *testing.T) {
	s, c, merged := handMade(t)
	crashApply(t, s, c, manifest(t, c.Workspace(), false), merged)
	c, err := s.Open(c.ID())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.Apply(nil, nil)
	if err != nil {
		t.Fatalf("apply after a crash: %v", err)
	}
	if len(rep.Recovered) != 1 || !strings.Contains(rep.Recovered[0], "rolled back first") {
		t.Errorf("recovered: %q", rep.Recovered)
	}
	if d := diffManifests(merged, manifest(t, c.Workspace(), false)); d != "" {
		t.Errorf("after the apply:\n%s", d)
	}
	_, c2, _ := handMade(t)
	if rep, err := c2.Apply(nil, nil); err != nil || len(rep.Recovered) != 0 {
		t.Errorf("an apply with nothing to recover: %v %q", err, rep.Recovered)
	}
}

// TestRollbackCrash cuts Apply short after its last operation but one,
// then cuts the rollback of the recovery short after each number of
// operations in turn, and recovers again: the second rollback skips what
// the first undid, so the workspace is the old one, every file with its
// old times, and the next Apply finds no conflict. Before, a file the
// first rollback had put back read as one the host changed after apply
// wrote it, and apply refused it (found by a tester).
func TestRollbackCrash(t *testing.T) {
	for undo := 1; ; undo++ {
		s, c, merged := handMade(t)
		ws := c.Workspace()
		mtimes := map[string]time.Time{}
		filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if fi, e := os.Lstat(p); err == nil && e == nil && fi.Mode().IsRegular() {
				mtimes[p] = fi.ModTime()
			}
			return nil
		})
		orig := manifest(t, ws, false)
		run := func(env ...string) (int, string) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(append(os.Environ(), "MOAT_STATE_DIR="+s.Dir, "MOAT_WS_ID="+c.ID()), env...)
			out, _ := cmd.CombinedOutput()
			return cmd.ProcessState.ExitCode(), string(out)
		}
		if code, out := run("MOAT_WS_HELPER=crash", "MOAT_WS_CRASH_AFTER=4"); code != 1 {
			t.Fatalf("crash helper: %d %s", code, out)
		}
		code, out := run("MOAT_WS_HELPER=undocrash", "MOAT_WS_UNDO_CRASH_AFTER="+strconv.Itoa(undo))
		if code == 0 {
			if undo < 3 {
				t.Fatalf("the rollback undid fewer than %d operations: the plan is too short to test", undo)
			}
			break
		}
		if code != 1 {
			t.Fatalf("undo crash helper: %d %s", code, out)
		}
		c, err := s.Open(c.ID())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Recover(); err != nil {
			t.Fatalf("recover after a rollback cut after %d: %v", undo, err)
		}
		if d := diffManifests(orig, manifest(t, ws, false)); d != "" {
			t.Fatalf("a rollback cut after %d, recovered, left:\n%s", undo, d)
		}
		for p, m := range mtimes {
			if fi, err := os.Lstat(p); err != nil || !fi.ModTime().Equal(m) {
				t.Errorf("a rollback cut after %d: %s has another mtime than its old %v (%v)", undo, p, m, err)
			}
		}
		rep, err := c.Apply(nil, nil)
		if err != nil || len(rep.Conflicts) > 0 {
			t.Fatalf("apply after a rollback cut after %d: %v %+v", undo, err, rep)
		}
		if d := diffManifests(merged, manifest(t, ws, false)); d != "" {
			t.Fatalf("apply after a rollback cut after %d:\n%s", undo, d)
		}
	}
}

// TestApplyHostEditWhileApplying edits the workspace after Apply's
// conflict check, where the check alone would not see it: Apply must stop,
// report the path as a conflict, and leave the workspace as it was, with
// the host's edits.
func TestApplyHostEditWhileApplying(t *testing.T) {
	defer func() { testHookBeforeExecute, testHookBeforeOp = nil, nil }()
	write := func(t *testing.T, p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		// edit makes the host's edits, given the workspace and the path
		// of the operation about to run ("" before execute); it returns
		// the paths it changed, "" when it did nothing (yet).
		edit func(t *testing.T, ws, op string) []string
		// conflict is the path reported as changed while apply ran.
		conflict string
	}{
		{"before execute: a modified file", func(t *testing.T, ws, op string) []string {
			if op != "" {
				return nil
			}
			write(t, filepath.Join(ws, "a.txt"), "host edit\n")
			return []string{"a.txt"}
		}, "a.txt"},
		{"between operations: a modified file", func(t *testing.T, ws, op string) []string {
			if op != "c.sh" {
				return nil
			}
			write(t, filepath.Join(ws, "keep"), "unrelated host edit\n")
			write(t, filepath.Join(ws, "c.sh"), "host edit\n")
			return []string{"keep", "c.sh"}
		}, "c.sh"},
		{"between operations: a file the change set adds", func(t *testing.T, ws, op string) []string {
			if op != "z.txt" {
				return nil
			}
			write(t, filepath.Join(ws, "z.txt"), "host's own z\n")
			return []string{"z.txt"}
		}, "z.txt"},
		{"between operations: below a directory the change set deletes", func(t *testing.T, ws, op string) []string {
			if op != "old" {
				return nil
			}
			write(t, filepath.Join(ws, "old", "x"), "host edit\n")
			return []string{"old/x"}
		}, "old"},
		{"between operations: a file apply already wrote, then another", func(t *testing.T, ws, op string) []string {
			if op != "z.txt" {
				return nil
			}
			// a.txt was replaced by an earlier operation: the rollback
			// must keep the host's edit of it, not restore the old a.txt.
			write(t, filepath.Join(ws, "a.txt"), "host edit over the applied one\n")
			write(t, filepath.Join(ws, "z.txt"), "host's own z\n")
			return []string{"a.txt", "z.txt"}
		}, "z.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c, _ := handMade(t)
			ws := c.Workspace()
			orig := manifest(t, ws, false)
			var edited []string
			testHookBeforeExecute = func() { edited = append(edited, tc.edit(t, ws, "")...) }
			testHookBeforeOp = func(p string) { edited = append(edited, tc.edit(t, ws, p)...) }
			rep, err := c.Apply(nil, nil)
			testHookBeforeExecute, testHookBeforeOp = nil, nil
			if len(edited) == 0 {
				t.Fatal("the host edit was never made")
			}
			if !errors.Is(err, ErrConflict) || len(rep.Conflicts) == 0 || rep.Conflicts[0].Path != tc.conflict || len(rep.Applied) > 0 {
				t.Fatalf("apply with a host edit while applying: %v %+v", err, rep)
			}
			// The workspace is as it was, but for the host's edits.
			want := map[string]string{}
			for k, v := range orig {
				want[k] = v
			}
			got := manifest(t, ws, false)
			for _, p := range edited {
				want[p] = got[p]
				if b, _ := os.ReadFile(filepath.Join(ws, p)); !strings.Contains(string(b), "host") {
					t.Errorf("%s lost the host's edit: %q", p, b)
				}
			}
			if d := diffManifests(want, got); d != "" {
				t.Errorf("the refused apply changed the workspace:\n%s", d)
			}
			leftovers, _ := filepath.Glob(filepath.Join(ws, ".moat-*"))
			if _, err := os.Lstat(c.journalPath()); err == nil || len(leftovers) > 0 {
				t.Errorf("journal or %v left behind", leftovers)
			}
			// The rollback's own ctimes are recorded as Apply's, but not
			// the host's edit: applying again still refuses it.
			rep, err = c.Apply(nil, nil)
			var paths []string
			for _, cf := range rep.Conflicts {
				paths = append(paths, cf.Path)
			}
			if !errors.Is(err, ErrConflict) || !slices.Contains(paths, tc.conflict) {
				t.Errorf("second apply: %v, conflicts %q", err, paths)
			}
			if d := diffManifests(got, manifest(t, ws, false)); d != "" {
				t.Errorf("the second apply changed the workspace:\n%s", d)
			}
		})
	}
	// A host edit of a file Apply already wrote, with nothing else in the
	// way: Apply succeeds, the edit stays, and is not taken for Apply's.
	t.Run("after its file was written", func(t *testing.T) {
		_, c, merged := handMade(t)
		ws := c.Workspace()
		testHookBeforeOp = func(p string) {
			if p == "z.txt" {
				write(t, filepath.Join(ws, "a.txt"), "host edit over the applied one\n")
			}
		}
		_, err := c.Apply(nil, nil)
		testHookBeforeOp = nil
		if err != nil {
			t.Fatal(err)
		}
		got := manifest(t, ws, false)
		if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "host edit over the applied one\n" {
			t.Errorf("a.txt: %q", b)
		}
		merged["a.txt"] = got["a.txt"]
		if d := diffManifests(merged, got); d != "" {
			t.Errorf("workspace after apply:\n%s", d)
		}
		rep, err := c.Apply(nil, nil)
		if !errors.Is(err, ErrConflict) || len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "a.txt" {
			t.Errorf("applying again over the host's a.txt: %v %+v", err, rep)
		}
	})
	// Positive control: the same hooks, making no edit, and Apply goes
	// through.
	t.Run("no edit", func(t *testing.T) {
		_, c, merged := handMade(t)
		calls := 0
		testHookBeforeExecute = func() { calls++ }
		testHookBeforeOp = func(string) { calls++ }
		rep, err := c.Apply(nil, nil)
		testHookBeforeExecute, testHookBeforeOp = nil, nil
		if err != nil || calls < 2 {
			t.Fatalf("apply: %v %+v (%d hook calls)", err, rep, calls)
		}
		if d := diffManifests(merged, manifest(t, c.Workspace(), false)); d != "" {
			t.Errorf("workspace after apply:\n%s", d)
		}
	})
}

// A directory the host swaps for a symlink while Apply runs (here, right
// before the operation on a path in it) is not followed: Apply stops
// with a conflict and writes nothing where the link leads. Before, each
// creation went through the link: as root, into any directory. The
// control swaps nothing, and the same change set lands.
func TestApplyNeverFollowsASwappedDirectory(t *testing.T) {
	defer func() { testHookBeforeOp = nil }()
	for _, tc := range []struct {
		name  string
		upper map[string]string
		at    string
		swap  bool
	}{
		{"new file", map[string]string{"sub/first": "1\n", "sub/new.txt": "evil\n"}, "sub/new.txt", true},
		{"new directory", map[string]string{"sub/first": "1\n", "sub/newdir/": ""}, "sub/newdir", true},
		{"control", map[string]string{"sub/first": "1\n", "sub/new.txt": "evil\n"}, "sub/new.txt", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := newSet(t, map[string]string{"sub/keep": "k\n"})
			ws := c.Workspace()
			outside := filepath.Join(filepath.Dir(ws), "outside")
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			tree(t, c.UpperDir(), tc.upper)
			reached := false
			testHookBeforeOp = func(p string) {
				if p != tc.at || reached {
					return
				}
				reached = true
				if !tc.swap {
					return
				}
				if err := os.Rename(filepath.Join(ws, "sub"), filepath.Join(ws, "sub.real")); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(outside, filepath.Join(ws, "sub")); err != nil {
					t.Error(err)
				}
			}
			rep, err := c.Apply(nil, nil)
			testHookBeforeOp = nil
			if !reached {
				t.Fatalf("no operation on %s", tc.at)
			}
			if !tc.swap {
				if err != nil {
					t.Fatalf("apply: %v %+v", err, rep)
				}
				if b, err := os.ReadFile(filepath.Join(ws, "sub/new.txt")); err != nil || string(b) != "evil\n" {
					t.Errorf("sub/new.txt: %q, %v", b, err)
				}
				return
			}
			if !errors.Is(err, ErrConflict) || len(rep.Conflicts) == 0 || rep.Conflicts[0].Path != tc.at {
				t.Errorf("apply: %v, %+v; want a conflict on %s", err, rep, tc.at)
			}
			if names, _ := os.ReadDir(outside); len(names) != 0 {
				t.Errorf("apply wrote through the symlink: %v", names)
			}
		})
	}
}

// Apply's chmod (of a mode change, and of a directory it made) does not
// follow a symlink the host put at the path after the check: it refuses.
// The controls: a file and a directory get the mode, and os.Chmod, which
// Apply used, does change the file the link leads to.
func TestChmodNoFollow(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"outside": "secret\n", "file": "f\n", "d/": "", "link": "-> outside"})
	p := func(name string) string { return filepath.Join(dir, name) }
	mode := func(name string) os.FileMode {
		fi, err := os.Lstat(p(name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	if err := chmodNoFollow(p("link"), 0o666); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("chmod of a symlink: %v, want ELOOP", err)
	}
	if m := mode("outside"); m != 0o644 {
		t.Errorf("the link's target got mode %o", m)
	}
	for name, want := range map[string]os.FileMode{"file": 0o600, "d": 0o700} {
		if err := chmodNoFollow(p(name), want); err != nil || mode(name) != want {
			t.Errorf("chmod %s: %v, mode %o", name, err, mode(name))
		}
	}
	if err := os.Chmod(p("link"), 0o666); err != nil || mode("outside") != 0o666 {
		t.Errorf("control: os.Chmod through the link: %v, mode %o", err, mode("outside"))
	}
}

// TestApplyKeepsHostDirMode: a directory the change set holds with the
// mode it had when copied up, which a person then changed on the host
// (chmod 700), is a conflict, not a mode change to make: applying it
// would open the private directory again. Forced, the change set's mode
// is set. The control: a file below it, applied alone, keeps the host's
// directory mode.
func TestApplyKeepsHostDirMode(t *testing.T) {
	_, c := newSet(t, map[string]string{"d/a.txt": "a\n"})
	ws := c.Workspace()
	os.Chmod(filepath.Join(ws, "d"), 0o755)
	os.MkdirAll(filepath.Join(c.UpperDir(), "d"), 0o755)
	os.Chmod(filepath.Join(c.UpperDir(), "d"), 0o755) // as copied up
	os.WriteFile(filepath.Join(c.UpperDir(), "d", "a.txt"), []byte("b\n"), 0o644)
	os.Chmod(filepath.Join(ws, "d"), 0o700) // the person's, after the run
	rep, err := c.Apply(nil, nil)
	if !errors.Is(err, ErrConflict) || len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "d" || !strings.Contains(rep.Conflicts[0].Reason, "0700 there") {
		t.Fatalf("apply over a host chmod: %v %+v", err, rep.Conflicts)
	}
	if _, err := c.Apply([]string{"d/a.txt"}, nil); err != nil {
		t.Fatalf("control: the file alone: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(ws, "d")); fi.Mode().Perm() != 0o700 {
		t.Errorf("the host's directory mode became %o", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "d", "a.txt")); string(b) != "b\n" {
		t.Errorf("control: the file: %q", b)
	}
}

// TestForceOverHostDirectorySaysWhatGoes: a file the change set adds
// where the host has since made a directory of its own: the conflict
// says that --force removes what the directory holds. The control: a
// file the host made there is a plain conflict.
func TestForceOverHostDirectorySaysWhatGoes(t *testing.T) {
	_, c := newSet(t, map[string]string{"keep": "k\n"})
	ws := c.Workspace()
	tree(t, c.UpperDir(), map[string]string{"new2": "x\n", "new3": "y\n"})
	tree(t, ws, map[string]string{"new2/p": "precious\n", "new2/q/r": "r\n", "new3": "host\n"})
	rep, err := c.Apply(nil, nil)
	if !errors.Is(err, ErrConflict) || len(rep.Conflicts) != 2 {
		t.Fatalf("apply: %v %+v", err, rep.Conflicts)
	}
	for _, cf := range rep.Conflicts {
		switch cf.Path {
		case "new2":
			if !strings.Contains(cf.Reason, "holding 3 entries, all of which --force removes") {
				t.Errorf("new2: %q", cf.Reason)
			}
		case "new3":
			if strings.Contains(cf.Reason, "directory") {
				t.Errorf("control: new3: %q", cf.Reason)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "new2/p")); string(b) != "precious\n" {
		t.Errorf("the refused apply changed new2/p: %q", b)
	}
}

// TestApplyRefusesRunsAfterReview: a run recorded in a change set after
// its last review (a named session's next run) changed it unseen: Apply
// refuses it until it is reviewed again. The controls: a change set
// never reviewed applies (nobody asked to see it), and so does one
// reviewed again.
func TestApplyRefusesRunsAfterReview(t *testing.T) {
	_, c := newSet(t, map[string]string{"keep": "k\n"})
	if err := c.Record([]string{"first"}, nil); err != nil {
		t.Fatal(err)
	}
	tree(t, c.UpperDir(), map[string]string{"a": "a\n"})
	if err := c.NoteReview(false); err != nil {
		t.Fatal(err)
	}
	if err := c.Record([]string{"second"}, nil); err != nil {
		t.Fatal(err)
	}
	tree(t, c.UpperDir(), map[string]string{"b": "b\n"})
	if _, err := c.Apply(nil, nil); !errors.Is(err, ErrStaleReview) || !strings.Contains(err.Error(), "1 more run ran in it after its last review") {
		t.Fatalf("apply after an unreviewed run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.Workspace(), "a")); !os.IsNotExist(err) {
		t.Fatalf("the refused apply wrote a: %v", err)
	}
	if err := c.NoteReview(false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(nil, nil); err != nil {
		t.Fatalf("control: apply after the second review: %v", err)
	}
	_, never := newSet(t, map[string]string{"keep": "k\n"})
	never.Record([]string{"first"}, nil)
	never.Record([]string{"second"}, nil)
	tree(t, never.UpperDir(), map[string]string{"b": "b\n"})
	if _, err := never.Apply(nil, nil); err != nil {
		t.Fatalf("control: a change set never reviewed: %v", err)
	}
}

// A workspace path a symbolic link, or another directory, took the place
// of is refused first, by name: apply and its preview said a mode differed and offered a
// --force that then failed "changed while apply ran" (found by a
// tester). Nothing is written where the link leads; with the directory
// back, the same change set applies (the control).
func TestApplyRefusesAWorkspaceNowALink(t *testing.T) {
	_, c := newSet(t, map[string]string{"a": "a\n"})
	tree(t, c.UpperDir(), map[string]string{"a": "a\nmore\n", "n": "new\n"})
	ws := c.Workspace()
	other := filepath.Join(filepath.Dir(ws), "other")
	tree(t, other, map[string]string{"a": "other\n"})
	if err := os.Rename(ws, ws+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, ws); err != nil {
		t.Fatal(err)
	}
	for name, try := range map[string]func() error{
		"apply":   func() error { _, err := c.Apply(nil, []string{".", "a", "n"}); return err },
		"preview": func() error { _, err := c.Preview(nil, nil); return err },
	} {
		if err := try(); !errors.Is(err, ErrReplaced) || !strings.Contains(err.Error(), "is now a symbolic link (to "+other+")") {
			t.Errorf("%s: %v, want the workspace named as a link", name, err)
		}
	}
	if ents, _ := os.ReadDir(other); len(ents) != 1 {
		t.Errorf("the link's target has %d entries, want its one", len(ents))
	}
	if b, _ := os.ReadFile(filepath.Join(other, "a")); string(b) != "other\n" {
		t.Errorf("the link's target changed: a = %q", b)
	}
	// Another directory at the path: the same refusal (apply wrote into
	// a directory moved or mounted there, found by a tester).
	os.Remove(ws)
	tree(t, ws, map[string]string{"a": "a\n"})
	for name, try := range map[string]func() error{
		"apply":   func() error { _, err := c.Apply(nil, []string{".", "a", "n"}); return err },
		"preview": func() error { _, err := c.Preview(nil, nil); return err },
	} {
		if err := try(); !errors.Is(err, ErrReplaced) || !strings.Contains(err.Error(), "is no longer the directory the run used") {
			t.Errorf("%s over another directory: %v, want the workspace named as replaced", name, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "n")); err == nil {
		t.Error("apply wrote into the other directory")
	}
	os.RemoveAll(ws)
	if err := os.Rename(ws+".moved", ws); err != nil {
		t.Fatal(err)
	}
	// (a alone: the moves changed the directory, so a file new in it is
	// a conflict of its own.)
	if rep, err := c.Apply([]string{"a"}, nil); err != nil {
		t.Fatalf("control: apply with the directory back: %v %+v", err, rep.Conflicts)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a")); string(b) != "a\nmore\n" {
		t.Errorf("control: a = %q", b)
	}
}

// TestApplyReadOnlyDirectories: a directory the change set makes, or
// changes, to a mode its owner cannot write (a Go module cache is 0555)
// gets that mode once what goes below it is written: an owner other than
// root could not write into it before (apply failed, rolled back). The
// control: the files are there, and each directory has its mode.
func TestApplyReadOnlyDirectories(t *testing.T) {
	_, c := newSet(t, map[string]string{"ro/old": "o\n"})
	ws := c.Workspace()
	up := c.UpperDir()
	tree(t, up, map[string]string{"cache/mod/f": "x\n", "ro/new": "n\n"})
	for _, d := range []string{"cache/mod", "cache", "ro"} {
		os.Chmod(filepath.Join(up, d), 0o555)
	}
	t.Cleanup(func() {
		for _, root := range []string{up, ws} {
			for _, d := range []string{"cache", "cache/mod", "ro"} {
				os.Chmod(filepath.Join(root, d), 0o755)
			}
		}
	})
	if _, err := c.Apply(nil, nil); err != nil {
		t.Fatalf("apply: %v", err)
	}
	for p, want := range map[string]string{"cache/mod/f": "x\n", "ro/new": "n\n", "ro/old": "o\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, p)); string(b) != want {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
	for _, d := range []string{"cache", "cache/mod", "ro"} {
		if fi, err := os.Stat(filepath.Join(ws, d)); err != nil || fi.Mode().Perm() != 0o555 {
			t.Errorf("%s: mode %v (%v), want 0555", d, fi.Mode().Perm(), err)
		}
	}
}

// TestForcedProtectedSaid: a protected path that the force list lets
// through (here by forcing the whole tree, ".") is listed in the report,
// so that a catch-all force does not apply one unsaid. The control: a
// change to an ordinary path is applied and not listed.
func TestForcedProtectedSaid(t *testing.T) {
	_, c := newSet(t, map[string]string{"a": "a\n"})
	tree(t, c.UpperDir(), map[string]string{".envrc": "echo hi\n", "a": "b\n"})
	if rep, err := c.Apply(nil, nil); !errors.Is(err, ErrProtected) || !slices.Equal(rep.Protected, []string{".envrc"}) {
		t.Fatalf("unforced: %v %q", err, rep.Protected)
	}
	rep, err := c.Apply(nil, []string{"."})
	if err != nil || !slices.Equal(rep.ProtectedForced, []string{".envrc"}) || len(rep.Applied) != 2 {
		t.Errorf("forced with \".\": %v, protected forced %q, applied %d", err, rep.ProtectedForced, len(rep.Applied))
	}
}
