package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// linkedSet is a change set whose run made one file under four names
// (hard links: "big", "d/l2", "l1", and "m.txt" over a file the workspace
// had) and one file of its own ("solo").
func linkedSet(t *testing.T) (*Store, *ChangeSet) {
	t.Helper()
	s, c := newSet(t, map[string]string{"m.txt": "old m\n", "keep": "k\n"})
	up := c.UpperDir()
	tree(t, up, map[string]string{"big": "one file, four names\n", "d/": "", "solo": "solo\n"})
	for _, name := range []string{"l1", "d/l2", "m.txt"} {
		if err := os.Link(filepath.Join(up, "big"), filepath.Join(up, name)); err != nil {
			t.Fatal(err)
		}
	}
	return s, c
}

func inodeOf(t *testing.T, p string) (ino uint64, nlink uint64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino, uint64(st.Nlink)
}

// TestApplyKeepsHardLinks: the names of one file in the change set are
// one file in the workspace after apply, so apply writes what the run
// made (and its disk limit counted) once. Before, each name was written
// as a copy: a run under --disk 16M could link a 15 MB file thousands of
// times and make apply write tens of GB (found by a tester). The file the
// run made alone stays a file of its own (the positive control), and
// every name reads the run's content.
func TestApplyKeepsHardLinks(t *testing.T) {
	_, c := linkedSet(t)
	rep, err := c.Apply(nil, nil)
	if err != nil {
		t.Fatalf("apply: %v %+v", err, rep)
	}
	ws := c.Workspace()
	ino, nlink := inodeOf(t, filepath.Join(ws, "big"))
	if nlink != 4 {
		t.Errorf("big has %d links in the workspace, want 4", nlink)
	}
	for _, name := range []string{"big", "l1", "d/l2", "m.txt"} {
		b, err := os.ReadFile(filepath.Join(ws, name))
		if err != nil || string(b) != "one file, four names\n" {
			t.Errorf("%s: %q %v", name, b, err)
		}
		if i, _ := inodeOf(t, filepath.Join(ws, name)); i != ino {
			t.Errorf("%s is not the same file as big", name)
		}
	}
	if i, n := inodeOf(t, filepath.Join(ws, "solo")); i == ino || n != 1 {
		t.Errorf("solo: inode %d (big's %d), %d links", i, ino, n)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "solo")); err != nil || string(b) != "solo\n" {
		t.Errorf("solo: %q %v", b, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(ws, ".moat-*"))
	if len(leftovers) > 0 {
		t.Errorf("left behind: %v", leftovers)
	}
	// Apply's own ctimes, which linking changes, are not host edits to
	// the change set's next apply.
	if conf := c.conflicts(mustChanges(t, c)); len(conf) > 0 {
		t.Errorf("after apply, its own links read as host edits: %+v", conf)
	}
}

func mustChanges(t *testing.T, c *ChangeSet) []Change {
	t.Helper()
	ch, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestApplyLinksRolledBack: a host edit stops the apply after the links
// were made, and the rollback takes every name away again, though the
// links changed the first name's ctime since it was written (before the
// group's ctime was left out, the rollback would keep that file as one
// the host changed).
func TestApplyLinksRolledBack(t *testing.T) {
	defer func() { testHookBeforeOp = nil }()
	_, c := linkedSet(t)
	ws := c.Workspace()
	orig := manifest(t, ws, false)
	testHookBeforeOp = func(p string) {
		if p == "solo" {
			os.WriteFile(filepath.Join(ws, "solo"), []byte("host's own\n"), 0o644)
		}
	}
	rep, err := c.Apply(nil, nil)
	testHookBeforeOp = nil
	if !errors.Is(err, ErrConflict) || len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "solo" {
		t.Fatalf("apply with a host edit: %v %+v", err, rep)
	}
	orig["solo"] = manifest(t, ws, false)["solo"]
	if d := diffManifests(orig, manifest(t, ws, false)); d != "" {
		t.Errorf("after the rollback:\n%s", d)
	}
}

// TestApplyLinkNeverTakesTheHostsFile: the host replaced the first name
// after apply wrote it; the next name is not linked to the host's file
// (which would give it the host's content under a name the run chose),
// the apply stops, and the host's file is kept.
func TestApplyLinkNeverTakesTheHostsFile(t *testing.T) {
	defer func() { testHookBeforeOp = nil }()
	_, c := linkedSet(t)
	ws := c.Workspace()
	testHookBeforeOp = func(p string) {
		if p == "d/l2" {
			tmp := filepath.Join(ws, "host-tmp")
			os.WriteFile(tmp, []byte("the host's big\n"), 0o644)
			os.Rename(tmp, filepath.Join(ws, "big"))
		}
	}
	rep, err := c.Apply(nil, nil)
	testHookBeforeOp = nil
	if !errors.Is(err, ErrConflict) || len(rep.Applied) > 0 {
		t.Fatalf("apply with the first name replaced: %v %+v", err, rep)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "big")); string(b) != "the host's big\n" {
		t.Errorf("big is %q, want the host's", b)
	}
	for _, name := range []string{"d/l2", "l1"} {
		if _, err := os.Lstat(filepath.Join(ws, name)); err == nil {
			t.Errorf("%s was left in the workspace", name)
		}
	}
}

// TestApplyLinksCrash: killed after each operation in turn, then
// recovered, the workspace is the old one or the new one, never a mix,
// and the next apply makes the links.
func TestApplyLinksCrash(t *testing.T) {
	for after := 0; ; after++ {
		s, c := linkedSet(t)
		orig := manifest(t, c.Workspace(), false)
		if !crashAfter(t, s, c, after) {
			break
		}
		c, err := s.Open(c.ID())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Recover(); err != nil {
			t.Fatalf("recover after a crash at %d: %v", after, err)
		}
		got := manifest(t, c.Workspace(), false)
		if _, n := inodeOf(t, filepath.Join(c.Workspace(), "m.txt")); n == 4 {
			continue // the crash came after the commit: recovery finished it
		}
		if d := diffManifests(orig, got); d != "" {
			t.Fatalf("crash after operation %d, rolled back, left:\n%s", after, d)
		}
		if _, err := c.Apply(nil, nil); err != nil {
			t.Fatalf("apply after recovering from a crash at %d: %v", after, err)
		}
		if _, n := inodeOf(t, filepath.Join(c.Workspace(), "big")); n != 4 {
			t.Fatalf("after a crash at %d and a new apply: big has %d links", after, n)
		}
	}
}
