package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveTree: a tree whose directories a command made unsearchable
// and read-only is removed whole, and the mode of a directory outside it
// that a link in it names is left as it was.
func TestRemoveTree(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(outside, 0o700)
	dir := filepath.Join(base, "tree")
	deep := filepath.Join(dir, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "f"), []byte("x"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "a", "link")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{deep, filepath.Join(dir, "a", "b"), filepath.Join(dir, "a"), dir} {
		if err := os.Chmod(d, 0); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() != 0 {
		// The control: without the change of modes the tree cannot be
		// removed by its owner.
		if err := os.RemoveAll(dir); err == nil {
			t.Fatal("control: os.RemoveAll removed a tree of mode-0 directories")
		}
	}
	if err := RemoveTree(dir); err != nil {
		t.Fatalf("RemoveTree: %v", err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("tree left: %v", err)
	}
	if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o500 {
		t.Fatalf("outside directory: %v, mode %v", err, fi.Mode())
	}
}
