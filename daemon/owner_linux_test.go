//go:build linux

package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFilesAsOwner: a daemon running as root serves a local user's files
// with that user's rights, not its own: a directory of another user's in
// the workspace, closed to the tenant, is neither read, listed nor
// written through the files API. The tenant's own files are (positive
// control), and what it writes is its own.
func TestFilesAsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon's rights beyond the tenant's are root's")
	}
	const tenant, other = 4242, 4343
	// Not t.TempDir: its parent is closed to the tenant, which reaches
	// the workspace with its own rights.
	parent, err := os.MkdirTemp("", "moat-owner-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	os.Chmod(parent, 0o755)
	ws := filepath.Join(parent, "ws")
	priv := filepath.Join(ws, "private")
	for _, d := range []string{ws, priv} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(priv, "secret"), []byte("the other user's"), 0o600)
	os.WriteFile(filepath.Join(ws, "mine"), []byte("the tenant's"), 0o600)
	os.Chown(ws, tenant, tenant)
	os.Chown(filepath.Join(ws, "mine"), tenant, tenant)
	os.Chown(filepath.Join(priv, "secret"), other, other)
	os.Chown(priv, other, other)
	os.Chmod(priv, 0o700)

	m := newManager(t, Config{})
	ctx := context.Background()
	s, err := m.Create(ctx, UIDTenant(tenant), &CreateRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := s.ReadFile("private/secret"); err == nil {
		t.Errorf("read another user's file: %q", b)
	}
	if _, _, err := s.List("private"); err == nil {
		t.Errorf("listed another user's closed directory")
	}
	if err := s.WriteFile(ctx, "private/planted", []byte("x"), 0o644); err == nil {
		t.Errorf("wrote into another user's closed directory")
	}
	if err := s.Remove(ctx, "private/secret"); err == nil || errors.Is(err, ErrNoFile) {
		t.Errorf("remove of another user's file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(priv, "secret")); err != nil {
		t.Errorf("the other user's file: %v", err)
	}

	// Positive control.
	if b, err := s.ReadFile("mine"); err != nil || string(b) != "the tenant's" {
		t.Errorf("read mine: %q %v", b, err)
	}
	if err := s.WriteFile(ctx, "new", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Mkdir(ctx, "dir"); err != nil {
		t.Fatal(err)
	}
	// A workspace the daemon made for the tenant, in its own directory.
	tmp, err := m.Create(ctx, UIDTenant(tenant), &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tmp.Mkdir(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if err := tmp.WriteFile(ctx, "d/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := tmp.ReadFile("d/f"); err != nil || string(b) != "x" {
		t.Errorf("read d/f in the daemon's workspace: %q %v", b, err)
	}
	for _, p := range []string{"new", "dir"} {
		st := statOwner(t, filepath.Join(ws, p))
		if st != tenant {
			t.Errorf("%s is owned by %d, want %d", p, st, tenant)
		}
	}
}

func statOwner(t *testing.T, p string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid)
}
