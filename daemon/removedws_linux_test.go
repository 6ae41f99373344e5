//go:build linux

package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFilesOfARemovedWorkspace: once the workspace directory is removed
// on the host, the files API says so, for a new file too (each said "no
// such file", found by a tester); before, the same calls work (the
// control).
func TestFilesOfARemovedWorkspace(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, Config{})
	ctx := context.Background()
	s, err := m.Create(ctx, UIDTenant(os.Geteuid()), &CreateRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFile(ctx, "a", []byte("x\n"), 0o644); err != nil {
		t.Fatalf("control: %v", err)
	}
	if _, _, err := s.List("."); err != nil {
		t.Fatalf("control: %v", err)
	}
	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	for op, err := range map[string]error{
		"write": s.WriteFile(ctx, "b", []byte("x\n"), 0o644),
		"list":  func() error { _, _, err := s.List("."); return err }(),
		"read":  func() error { _, err := s.ReadFile("a"); return err }(),
	} {
		if !errors.Is(err, ErrWorkspace) || !strings.Contains(err.Error(), "removed since the session began") {
			t.Errorf("%s in a removed workspace: %v, want it said", op, err)
		}
	}
}
