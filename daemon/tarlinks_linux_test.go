//go:build linux

package daemon

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func linkTar(t *testing.T, hs ...*tar.Header) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	return &buf
}

// TestUntarDirModeNotThroughLink: a directory entry of an upload sets the
// mode of the directory it makes or finds at its own path, never of one a
// link there leads to: not a protected directory's (.git/hooks made
// world-writable), not the workspace root's. The same entry at a real
// directory sets its mode.
func TestUntarDirModeNotThroughLink(t *testing.T) {
	ws := t.TempDir()
	hooks := filepath.Join(ws, ".git", "hooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(ws, 0o755)
	os.Chmod(hooks, 0o755)
	// A link a command of the session planted.
	if err := os.Symlink(".git/hooks", filepath.Join(ws, "h")); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, Config{})
	ctx := context.Background()
	s, err := m.Create(ctx, UIDTenant(os.Geteuid()), &CreateRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	dir := func(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o777} }

	// Positive control: a real directory gets the entry's mode.
	if _, err := s.Untar(ctx, ".", linkTar(t, dir("d/"))); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(ws, "d")); err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("d: %v %v, want mode 777", fi, err)
	}

	for name, tar := range map[string]*bytes.Buffer{
		"planted link to a protected directory": linkTar(t, dir("h/")),
		"the archive's link to the root":        linkTar(t, &tar.Header{Name: "r", Typeflag: tar.TypeSymlink, Linkname: "."}, dir("r/")),
	} {
		_, err := s.Untar(ctx, ".", tar)
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, p := range []string{ws, hooks} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v %v, want 755", p, fi.Mode().Perm(), err)
		}
	}
}
