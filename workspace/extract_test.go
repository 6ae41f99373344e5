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
