//go:build linux

package daemon

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// untarSession is a session of a new workspace, made by prepare, for the
// upload tests.
func untarSession(t *testing.T, prepare func(ws string)) (*Session, string) {
	t.Helper()
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(ws)
	}
	m := newManager(t, Config{})
	s, err := m.Create(context.Background(), UIDTenant(os.Geteuid()), &CreateRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	return s, ws
}

func symlinkEntry(name, target string) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}
}

func fileEntry(name string) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644}
}

// within says whether the real path of p lies in the workspace ws.
func within(t *testing.T, ws, p string) bool {
	t.Helper()
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	root, _ := filepath.EvalSymlinks(ws)
	rel, err := filepath.Rel(root, real)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// TestUntarLinkChainsOut: a link whose target stays in the workspace
// lexically but leads out through links (the archive's own, made by an
// earlier or a later entry, or the workspace's) is refused, before
// anything is written. Links that stay in, through links too, upload.
func TestUntarLinkChainsOut(t *testing.T) {
	ctx := context.Background()
	planted := func(links ...string) func(string) {
		return func(ws string) {
			for i := 0; i < len(links); i += 2 {
				if err := os.Symlink(links[i+1], filepath.Join(ws, links[i])); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for name, c := range map[string]struct {
		prepare func(string)
		hs      []*tar.Header
	}{
		"chain of the archive's links": {nil, []*tar.Header{fileEntry("aaa"), symlinkEntry("b", "."), symlinkEntry("c", "b/.."), symlinkEntry("sub/deep/d", "../../c/..")}},
		"one step":                     {nil, []*tar.Header{fileEntry("aaa"), symlinkEntry("b", "."), symlinkEntry("c", "b/..")}},
		"the link made after":          {nil, []*tar.Header{fileEntry("aaa"), symlinkEntry("c", "b/.."), symlinkEntry("b", ".")}},
		"a link of the workspace":      {planted("b", "."), []*tar.Header{fileEntry("aaa"), symlinkEntry("c", "b/..")}},
		"a workspace link leading out": {planted("e", "/etc"), []*tar.Header{fileEntry("aaa"), symlinkEntry("l", "e/passwd")}},
		"a loop":                       {nil, []*tar.Header{fileEntry("aaa"), symlinkEntry("x", "y"), symlinkEntry("y", "x")}},
	} {
		s, ws := untarSession(t, c.prepare)
		_, err := s.Untar(ctx, ".", linkTar(t, c.hs...))
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v, want bad request", name, err)
		}
		for _, h := range c.hs {
			if _, err := os.Lstat(filepath.Join(ws, h.Name)); err == nil && (c.prepare == nil || h.Name != "b" && h.Name != "e") {
				t.Errorf("%s: %s written by a refused upload", name, h.Name)
			}
		}
	}

	// Controls: links that stay in the workspace, through links too.
	s, ws := untarSession(t, planted("w", "sub"))
	hs := []*tar.Header{
		fileEntry("sub/file"), symlinkEntry("l", "sub/file"), symlinkEntry("sub/deep/m", "../file"),
		symlinkEntry("b", "sub"), symlinkEntry("c", "b/../sub/file"), symlinkEntry("v", "w/../sub/file"),
	}
	rep, err := s.Untar(ctx, ".", linkTar(t, hs...))
	if err != nil || rep.Entries != len(hs) {
		t.Fatalf("links that stay in: %+v %v", rep, err)
	}
	for _, l := range []string{"l", "sub/deep/m", "c", "v"} {
		if p := filepath.Join(ws, l); !within(t, ws, p) {
			t.Errorf("%s leads out", l)
		} else if real, _ := filepath.EvalSymlinks(p); filepath.Base(real) != "file" {
			t.Errorf("%s leads to %s", l, real)
		}
	}
}

// TestUntarRefusedWritesNothing: an entry refused only where links lead
// it (a protected path reached through the archive's own link or the
// workspace's) refuses the archive before any entry is written; and so
// does one the writing would refuse halfway. A clean archive is the
// control.
func TestUntarRefusedWritesNothing(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]struct {
		prepare func(string)
		hs      []*tar.Header
		want    error
	}{
		"through the archive's link": {nil, []*tar.Header{fileEntry("aaa"), symlinkEntry("h", ".git/hooks"), fileEntry("h/pre-commit")}, ErrProtected},
		"through a workspace link": {func(ws string) {
			os.Symlink(".git/hooks", filepath.Join(ws, "h"))
		}, []*tar.Header{fileEntry("aaa"), fileEntry("h/pre-commit")}, ErrProtected},
		"through two workspace links": {func(ws string) {
			os.Symlink(".git", filepath.Join(ws, "g"))
			os.Symlink("g/hooks", filepath.Join(ws, "h"))
		}, []*tar.Header{fileEntry("aaa"), fileEntry("h/x/pre-commit")}, ErrProtected},
		"beneath the archive's link": {nil, []*tar.Header{fileEntry("aaa"), symlinkEntry("s", "sub"), fileEntry("sub/x"), fileEntry("s/y")}, ErrBadRequest},
		"a directory at the archive's link": {nil, []*tar.Header{fileEntry("aaa"), symlinkEntry("r", "."),
			{Name: "r/", Typeflag: tar.TypeDir, Mode: 0o777}}, ErrBadRequest},
		"a directory at a workspace file": {func(ws string) {
			os.WriteFile(filepath.Join(ws, "f"), nil, 0o644)
		}, []*tar.Header{fileEntry("aaa"), {Name: "f/", Typeflag: tar.TypeDir, Mode: 0o755}}, ErrBadRequest},
		"a file at a workspace directory": {func(ws string) {
			os.Mkdir(filepath.Join(ws, "d"), 0o755)
		}, []*tar.Header{fileEntry("aaa"), fileEntry("d")}, ErrBadRequest},
		"beneath the archive's file": {nil, []*tar.Header{fileEntry("aaa"), fileEntry("f"), fileEntry("f/x")}, ErrBadRequest},
	} {
		s, ws := untarSession(t, c.prepare)
		_, err := s.Untar(ctx, ".", linkTar(t, c.hs...))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
		for _, p := range []string{"aaa", "h/pre-commit", ".git/hooks/pre-commit", ".git/hooks/x", "s", "sub", "r"} {
			if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
				t.Errorf("%s: %s written by a refused upload", name, p)
			}
		}
	}

	// Control: files, directories and a link into the workspace upload,
	// with a planted link in the workspace leading to a plain directory.
	s, ws := untarSession(t, func(ws string) {
		os.Mkdir(filepath.Join(ws, "real"), 0o755)
		os.Symlink("real", filepath.Join(ws, "w"))
	})
	hs := []*tar.Header{fileEntry("aaa"), {Name: "sub/", Typeflag: tar.TypeDir, Mode: 0o755}, fileEntry("sub/file"),
		symlinkEntry("l", "sub/file"), fileEntry("w/x")}
	rep, err := s.Untar(ctx, ".", linkTar(t, hs...))
	if err != nil || rep.Entries != len(hs) {
		t.Fatalf("clean archive: %+v %v", rep, err)
	}
	for _, p := range []string{"aaa", "sub/file", "l", "real/x"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Errorf("clean archive: %s: %v", p, err)
		}
	}
}
