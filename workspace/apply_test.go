//go:build linux

package workspace

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
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
func TestApplyCrash(t *testing.T) {
	for after := 0; ; after++ {
		s, c, merged := handMade(t)
		orig := manifest(t, c.Workspace(), false)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MOAT_WS_HELPER=crash", "MOAT_STATE_DIR="+s.Dir, "MOAT_WS_ID="+c.ID(),
			"MOAT_WS_CRASH_AFTER="+strconv.Itoa(after))
		out, err := cmd.CombinedOutput()
		if err == nil {
			if after < 5 {
				t.Fatalf("Apply finished before operation %d: the plan is too short to test", after)
			}
			break // past the last operation and the commit
		}
		if code := cmd.ProcessState.ExitCode(); code != 1 {
			t.Fatalf("crash helper: %v\n%s", err, out)
		}
		c, err = s.Open(c.ID())
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
