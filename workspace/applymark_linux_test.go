package workspace

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecoverApplyInto: an apply killed part way marks its workspace,
// and the next run's RecoverApplyInto finishes or rolls it back, so the
// run sees the old tree or the new one; before, a direct run started in
// the half-applied tree without a word (found by a tester). The
// controls: a workspace with no interrupted apply is left alone, and a
// finished apply leaves no mark.
func TestRecoverApplyInto(t *testing.T) {
	s, c, merged := handMade(t)
	t.Setenv("MOAT_STATE_DIR", s.Dir)
	ws := c.Workspace()
	// The next run is in a subdirectory of the workspace (the apply was
	// into its top; found by a tester): one the apply makes.
	sub := filepath.Join(ws, "new", "e")
	orig := manifest(t, ws, false)
	if said, err := RecoverApplyInto(ws); said != "" || err != nil {
		t.Fatalf("control: nothing interrupted: %q %v", said, err)
	}
	crashApply(t, s, c, orig, merged)
	said, err := RecoverApplyInto(sub)
	if err != nil || !strings.Contains(said, c.ID()) {
		t.Fatalf("RecoverApplyInto: %q %v", said, err)
	}
	got := manifest(t, ws, false)
	if diffManifests(orig, got) != "" && diffManifests(merged, got) != "" {
		t.Errorf("after recovery, a mix:\n%s", diffManifests(orig, got))
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir, "applying")); len(ents) != 0 {
		t.Errorf("marks left: %v", ents)
	}
	if said, err := RecoverApplyInto(ws); said != "" || err != nil {
		t.Errorf("a second look: %q %v", said, err)
	}
	c, err = s.Open(c.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(s.Dir, "applying")); !os.IsNotExist(err) {
		t.Errorf("a finished apply left its mark or the marks' directory: %v", err)
	}
}

// TestOtherChangeSetsApplyKeepsTheMark: an apply killed part way, then
// another change set's apply into the same workspace: the second finishes
// or rolls back the first before it starts, and says so, where it used to
// replace the first's mark and remove it when done, leaving the
// workspace half applied with nothing to point the next run at it (found
// by a tester). The control: the second change set's own change lands.
func TestOtherChangeSetsApplyKeepsTheMark(t *testing.T) {
	s, a, merged := handMade(t)
	t.Setenv("MOAT_STATE_DIR", s.Dir)
	ws := a.Workspace()
	orig := manifest(t, ws, false)
	b, err := s.Create(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	tree(t, b.UpperDir(), map[string]string{"keep": "K\n"})
	crashApply(t, s, a, orig, merged)
	rep, err := b.Apply(nil, nil)
	if err != nil {
		t.Fatalf("apply of the other change set: %v %+v", err, rep)
	}
	if len(rep.Recovered) != 1 || !strings.Contains(rep.Recovered[0], a.ID()) {
		t.Errorf("recovered %q, want the first apply's recovery said", rep.Recovered)
	}
	got := manifest(t, ws, false)
	if got["keep"] == orig["keep"] {
		t.Errorf("control: the other change set's change did not land: %q", got["keep"])
	}
	delete(got, "keep")
	o, m := maps.Clone(orig), maps.Clone(merged)
	delete(o, "keep")
	delete(m, "keep")
	if diffManifests(o, got) != "" && diffManifests(m, got) != "" {
		t.Errorf("after the other apply, the first is half applied:\n%s", diffManifests(o, got))
	}
	if said, err := RecoverApplyInto(ws); said != "" || err != nil {
		t.Errorf("a run's look afterwards: %q %v", said, err)
	}
	if _, err := os.Lstat(filepath.Join(s.Dir, "applying")); !os.IsNotExist(err) {
		t.Errorf("marks left: %v", err)
	}
}

// TestRecoverApplyBelow: an apply killed part way into a directory below
// the one a run starts in is finished or rolled back before the run too
// (a tester's: a run, an overlay session and an apply in ws went on over
// ws/sub half applied); the control: with no apply interrupted, nothing
// is said.
func TestRecoverApplyBelow(t *testing.T) {
	s, a, merged := handMade(t)
	t.Setenv("MOAT_STATE_DIR", s.Dir)
	ws := a.Workspace()
	parent := filepath.Dir(ws)
	orig := manifest(t, ws, false)
	if said, err := RecoverApplyInto(parent); said != "" || err != nil {
		t.Fatalf("control: %q %v", said, err)
	}
	crashApply(t, s, a, orig, merged)
	said, err := RecoverApplyInto(parent)
	if err != nil || !strings.Contains(said, a.ID()) {
		t.Fatalf("RecoverApplyInto of the directory above: %q %v", said, err)
	}
	got := manifest(t, ws, false)
	if diffManifests(orig, got) != "" && diffManifests(merged, got) != "" {
		t.Errorf("after recovery, a mix:\n%s", diffManifests(orig, got))
	}
}

// crashApply runs an apply of c in a helper process that dies after its
// second operation, and checks that it left the workspace neither orig
// nor merged: half applied.
func crashApply(t *testing.T, s *Store, c *ChangeSet, orig, merged map[string]string) {
	t.Helper()
	if !crashAfter(t, s, c, 2) {
		t.Fatal("the apply finished before its third operation")
	}
	ws := c.Workspace()
	if d1, d2 := diffManifests(orig, manifest(t, ws, false)), diffManifests(merged, manifest(t, ws, false)); d1 == "" || d2 == "" {
		t.Fatal("the crash left the old or the new tree: the test shows nothing")
	}
}
