package workspace

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExtract: a sandbox's archive extracted on the host leaves out what
// host tools would read or run on their own there (a .git anywhere, the
// protected names at any depth, a git directory's config and hooks in a
// bare repository's layout, even when the archive lists HEAD after
// them), and copies the rest; with force everything is copied. The
// controls: ordinary files, a "config" in a directory that is no
// repository, and names that merely contain a protected one.
func TestExtract(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name, body string) {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}
		if strings.HasSuffix(name, "/") {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	add("src/main.go", "package main\n")
	add("notgit/config", "plain\n")
	add("src/envrc.txt", "not .envrc\n")
	add("src/.git/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n")
	add("sub/.envrc", "echo pwned\n")
	add("x/.vscode/tasks.json", "{}\n")
	add("proj/.cargo/config.toml", "[build]\n")
	add("bare/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n")
	add("bare/hooks/post-checkout", "#!/bin/sh\n")
	add("bare/objects/", "")
	add("bare/refs/", "")
	add("bare/HEAD", "ref: refs/heads/main\n")
	tw.Close()
	archive := buf.Bytes()

	dir := t.TempDir()
	var warned []string
	left, err := Extract(bytes.NewReader(archive), dir, false, func(name, why string) { warned = append(warned, name+": "+why) })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"src/.git/config", "sub/.envrc", "x/.vscode/tasks.json", "proj/.cargo/config.toml", "bare/config", "bare/hooks"}
	if !slices.Equal(left, want) {
		t.Errorf("left out %q, want %q (warned %q)", left, want, warned)
	}
	for _, p := range want {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s was copied", p)
		}
	}
	for _, p := range []string{"src/main.go", "notgit/config", "src/envrc.txt", "bare/HEAD", "bare/objects"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err != nil {
			t.Errorf("control %s: %v", p, err)
		}
	}

	forced := t.TempDir()
	left, err = Extract(bytes.NewReader(archive), forced, true, func(string, string) {})
	if err != nil || len(left) > 0 {
		t.Fatalf("forced: %q %v", left, err)
	}
	for _, p := range append(want, "src/main.go") {
		if _, err := os.Lstat(filepath.Join(forced, p)); err != nil {
			t.Errorf("forced %s: %v", p, err)
		}
	}

	buf.Reset()
	tw = tar.NewWriter(&buf)
	add("../escape", "x")
	tw.Close()
	if _, err := Extract(bytes.NewReader(buf.Bytes()), t.TempDir(), true, func(string, string) {}); err == nil || !strings.Contains(err.Error(), "outside the directory") {
		t.Errorf("../escape: %v", err)
	}
}

// TestExtractNotThroughLinks: an archive that makes a link and then
// names entries beneath it (h -> .git/hooks, then h/pre-commit: a daemon's
// walk listed a renamed name twice, found by a tester) writes nothing
// through it, with --force too, nor through a link the directory had; the
// link itself is copied, and so is the control beside it.
func TestExtractNotThroughLinks(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "h", Typeflag: tar.TypeSymlink, Linkname: ".git/hooks"})
	tw.WriteHeader(&tar.Header{Name: "h/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "h/pre-commit", Typeflag: tar.TypeReg, Mode: 0o755, Size: 3})
	tw.Write([]byte("x\n\n"))
	tw.WriteHeader(&tar.Header{Name: "had/tasks.json", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2})
	tw.Write([]byte("{}"))
	tw.WriteHeader(&tar.Header{Name: "ok.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2})
	tw.Write([]byte("ok"))
	tw.Close()
	for _, force := range []bool{false, true} {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755)
		os.Mkdir(filepath.Join(dir, ".vscode"), 0o755)
		os.Symlink(".vscode", filepath.Join(dir, "had"))
		left, err := Extract(bytes.NewReader(buf.Bytes()), dir, force, func(string, string) {})
		if err != nil {
			t.Fatalf("force %v: %v", force, err)
		}
		if !slices.Contains(left, "h/pre-commit") || !slices.Contains(left, "had/tasks.json") {
			t.Errorf("force %v: left out %q", force, left)
		}
		for _, p := range []string{".git/hooks/pre-commit", ".vscode/tasks.json"} {
			if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
				t.Errorf("force %v: %s was written through a link", force, p)
			}
		}
		if fi, err := os.Lstat(filepath.Join(dir, "h")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("force %v: the link h: %v %v", force, fi, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "ok.txt")); err != nil || string(b) != "ok" {
			t.Errorf("force %v: control ok.txt %q %v", force, b, err)
		}
	}
}
