package workspace

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A command that takes the write bit off what it planted, or off the
// directory holding it, does not keep the plant: the guard (the same
// user, without root) gives itself the bit back, moves it, and puts the
// holding directory's mode back. Every plant is moved or named, not only
// the first. As root the permissions never stood in the way; the test
// then checks the moves alone.
func TestQuarantineDespiteModes(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	time.Sleep(20 * time.Millisecond) // past the coarse clock's tick
	os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git/hooks/pre-commit"), []byte("#!/bin/sh\n"), 0o755)
	os.MkdirAll(filepath.Join(ws, ".vscode"), 0o755)
	os.WriteFile(filepath.Join(ws, ".vscode/tasks.json"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte("echo hi\n"), 0o644)
	for _, p := range []string{".git/hooks", ".vscode", "."} {
		os.Chmod(filepath.Join(ws, p), 0o555)
	}
	t.Cleanup(func() { os.Chmod(ws, 0o755) })
	moved, err := g.Finish(t.TempDir())
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	got := map[string]bool{}
	for _, m := range moved {
		got[m.Path] = true
	}
	for _, p := range []string{".git/hooks", ".vscode", ".envrc"} {
		if !got[p] {
			t.Errorf("%s not quarantined (moved: %+v)", p, moved)
		}
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s still in the workspace", p)
		}
	}
	if fi, err := os.Stat(ws); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("the workspace's mode is %v, want it put back to 0555", fi.Mode().Perm())
	}
}
