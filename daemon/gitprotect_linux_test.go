//go:build linux

package daemon

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestFilesProtectGitDirs: the files API refuses what the sandbox's guard
// keeps from a command of a direct session and an overlay's apply
// refuses: a submodule's git directory's config and hooks, a nested
// repository's .git, and what the workspace's git config names inside it
// (core.hooksPath). The same writes beside them go through.
func TestFilesProtectGitDirs(t *testing.T) {
	ws := t.TempDir()
	for p, body := range map[string]string{
		".git/HEAD":                 "ref: refs/heads/main\n",
		".git/config":               "[core]\n\thooksPath = githooks\n",
		".git/modules/sub/HEAD":     "ref: refs/heads/main\n",
		".git/modules/sub/config":   "[core]\n\tbare = false\n",
		"vendor/lib/.git/HEAD":      "ref: refs/heads/main\n",
		"vendor/lib/.git/config":    "[core]\n\tbare = false\n",
		"githooks/README":           "hooks\n",
		"vendor/lib/lib.go":         "package lib\n",
		".git/modules/sub/hooks/.k": "",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := newManager(t, Config{})
	ctx := context.Background()
	s, err := m.Create(ctx, UIDTenant(os.Geteuid()), &CreateRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	evil := []byte("[core]\n\tfsmonitor = touch /tmp/planted\n")
	for _, p := range []string{".git/modules/sub/config", ".git/modules/sub/hooks/pre-commit", "vendor/lib/.git/config", "vendor/lib/.git/hooks/post-checkout", "githooks/pre-commit"} {
		if err := s.WriteFile(ctx, p, evil, 0o755); !errors.Is(err, ErrProtected) {
			t.Errorf("write %s: %v, want ErrProtected", p, err)
		}
		if _, err := s.Untar(ctx, ".", linkTar(t, &tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o755})); !errors.Is(err, ErrProtected) {
			t.Errorf("upload %s: %v, want ErrProtected", p, err)
		}
	}
	if err := s.Remove(ctx, "githooks/README"); !errors.Is(err, ErrProtected) {
		t.Errorf("remove githooks/README: %v, want ErrProtected", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git/modules/sub/config")); string(b) != "[core]\n\tbare = false\n" {
		t.Errorf("the submodule's config was written: %q", b)
	}
	// Positive control: the same kind of writes where nothing runs them.
	for _, p := range []string{"vendor/lib/lib.go", ".git/modules/sub/refs/heads/x", "hooks/pre-commit"} {
		if err := s.WriteFile(ctx, p, []byte("x"), 0o644); err != nil && !errors.Is(err, ErrNoFile) {
			t.Errorf("write %s: %v", p, err)
		}
	}
	if err := s.Mkdir(ctx, "hooks"); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFile(ctx, "hooks/pre-commit", []byte("x"), 0o644); err != nil {
		t.Errorf("write hooks/pre-commit: %v", err)
	}
}
