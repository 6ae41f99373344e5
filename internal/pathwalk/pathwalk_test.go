package pathwalk

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWalk: a path through a relative and an absolute link visits each
// link's place and then what it names, and ends where
// filepath.EvalSymlinks says; a loop and a missing component do not
// resolve.
func TestWalk(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	os.Symlink("a", filepath.Join(dir, "rel"))
	os.Symlink(filepath.Join(dir, "a", "b"), filepath.Join(dir, "abs"))
	os.Symlink("loop", filepath.Join(dir, "loop"))
	// Joined by hand: filepath.Join would clean the ".." away.
	p := dir + "/rel/b/../../abs"
	visits, real, ok := Walk(p)
	want, _ := filepath.EvalSymlinks(p)
	if !ok || real != want || !slices.Contains(visits, filepath.Join(dir, "rel")) || !slices.Contains(visits, filepath.Join(dir, "abs")) {
		t.Errorf("Walk = %v %q %v, want to end at %q through the links", visits, real, ok, want)
	}
	for _, p := range []string{filepath.Join(dir, "loop"), filepath.Join(dir, "missing", "x")} {
		if _, _, ok := Walk(p); ok {
			t.Errorf("Walk(%s) resolved", p)
		}
	}
}
