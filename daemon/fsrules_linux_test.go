//go:build linux

package daemon

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/moatbox/moat/policy"
)

// TestFilesKeepFilesystemRules: a path of the workspace that the policy
// hides from the session's commands (filesystem.deny) is not read through
// the files API either, nor through a link to it, nor in a download; one
// the policy makes read-only inside (filesystem.read_only) is not
// written. The paths beside them are (positive control); a command of the
// session meets the same rules (moat run --deny, --ro).
func TestFilesKeepFilesystemRules(t *testing.T) {
	ws := t.TempDir()
	for p, body := range map[string]string{".env": "TOKEN=secret\n", "vendor/a": "a\n", "src/main.go": "package main\n", "keys/prod-db.pem": "KEY\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".env", filepath.Join(ws, "env-link")); err != nil {
		t.Fatal(err)
	}
	ro := append(policy.Default().Filesystem.ReadOnly, filepath.Join(ws, "vendor"))
	var q []string
	for _, r := range ro {
		q = append(q, strconv.Quote(r))
	}
	doc := fmt.Sprintf("[filesystem]\nread_only = [%s]\ndeny = [%q, %q]\n", strings.Join(q, ", "), filepath.Join(ws, ".env"), filepath.Join(ws, "keys"))
	m := newManager(t, Config{})
	ctx := context.Background()
	s, err := m.Create(ctx, UIDTenant(os.Geteuid()), &CreateRequest{Workspace: ws, Policy: doc})
	if err != nil {
		t.Fatal(err)
	}

	for _, p := range []string{".env", "env-link"} {
		if b, err := s.ReadFile(p); !errors.Is(err, ErrWorkspace) {
			t.Errorf("read %s: %q %v, want ErrWorkspace", p, b, err)
		}
	}
	if ents, _, err := s.List("keys"); !errors.Is(err, ErrWorkspace) {
		t.Errorf("list keys: %v %v, want ErrWorkspace", ents, err)
	}
	if err := s.tar("keys", io.Discard, &LeftOut{}); !errors.Is(err, ErrWorkspace) {
		t.Errorf("download keys: %v, want ErrWorkspace", err)
	}
	if err := s.WriteFile(ctx, ".env", []byte("TOKEN=planted\n"), 0o644); !errors.Is(err, ErrWorkspace) {
		t.Errorf("write .env: %v, want ErrWorkspace", err)
	}
	var buf bytes.Buffer
	if err := s.tar(".", &buf, &LeftOut{}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	eachTarEntry(t, &buf, func(h *tar.Header, body []byte) {
		names[h.Name] = true
		if bytes.Contains(body, []byte("secret")) {
			t.Errorf("the download holds the hidden file as %s", h.Name)
		}
	})
	if !names["src/main.go"] || names[".env"] || names["keys/"] || names["keys/prod-db.pem"] {
		t.Errorf("download: %v, want src/main.go and no .env", names)
	}
	for _, p := range []string{"vendor/a", "vendor/new"} {
		if err := s.WriteFile(ctx, p, []byte("planted\n"), 0o644); !errors.Is(err, ErrWorkspace) {
			t.Errorf("write %s: %v, want ErrWorkspace", p, err)
		}
	}
	if _, err := s.Untar(ctx, ".", linkTar(t, &tar.Header{Name: "vendor/b", Typeflag: tar.TypeReg, Mode: 0o644})); !errors.Is(err, ErrWorkspace) {
		t.Errorf("upload vendor/b: %v, want ErrWorkspace", err)
	}
	if err := s.Remove(ctx, "vendor/a"); !errors.Is(err, ErrWorkspace) {
		t.Errorf("remove vendor/a: %v, want ErrWorkspace", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "vendor/a")); string(b) != "a\n" {
		t.Errorf("vendor/a: %q", b)
	}

	// Positive control.
	if ents, _, err := s.List("src"); err != nil || len(ents) != 1 {
		t.Errorf("list src: %v %v", ents, err)
	}
	if b, err := s.ReadFile("vendor/a"); err != nil || string(b) != "a\n" {
		t.Errorf("read vendor/a: %q %v", b, err)
	}
	if err := s.WriteFile(ctx, "src/new.go", []byte("package main\n"), 0o644); err != nil {
		t.Errorf("write src/new.go: %v", err)
	}
}

// TestFilesHideDeniedFromStatAndList: a path the policy hides
// (filesystem.deny) is not described by Stat nor named by List, as it is
// not read or downloaded: Stat refuses it, and any path below it whether
// it exists or not (a missing name answers as an existing one, so what
// the directory holds cannot be probed), through a link to it too; List
// leaves it out of its parent's entries, as a download does. The paths
// beside it stat and list as ever (positive control), a missing one
// among them ErrNoFile.
func TestFilesHideDeniedFromStatAndList(t *testing.T) {
	ws := t.TempDir()
	for p, body := range map[string]string{".secrets/x.txt": "secret\n", ".secrets/sub/y": "secret\n", "src/main.go": "package main\n", "top.txt": "top\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"sec-link": ".secrets", "x-link": ".secrets/x.txt"} {
		if err := os.Symlink(to, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	doc := fmt.Sprintf("[filesystem]\ndeny = [%q]\n", filepath.Join(ws, ".secrets"))
	m := newManager(t, Config{})
	ctx := context.Background()
	s, err := m.Create(ctx, UIDTenant(os.Geteuid()), &CreateRequest{Workspace: ws, Policy: doc})
	if err != nil {
		t.Fatal(err)
	}
	hidden := func(op, p string, err error) {
		t.Helper()
		if !errors.Is(err, ErrWorkspace) || errors.Is(err, ErrNoFile) || !strings.Contains(err.Error(), "hidden from the session by the policy") {
			t.Errorf("%s %s: %v, want the hidden path's refusal", op, p, err)
		}
	}

	for _, p := range []string{".secrets", ".secrets/", ".secrets/x.txt", ".secrets/sub", ".secrets/sub/y", ".secrets/nothere", ".secrets/nothere/deeper", ".secrets/x.txt/y", "sec-link/x.txt", "sec-link/nothere"} {
		fi, err := s.Stat(p)
		if fi != nil {
			t.Errorf("stat %s: %+v", p, fi)
		}
		hidden("stat", p, err)
	}
	for _, p := range []string{".secrets", ".secrets/nothere", "sec-link", "sec-link/sub"} {
		ents, _, err := s.List(p)
		if ents != nil {
			t.Errorf("list %s: %v", p, ents)
		}
		hidden("list", p, err)
	}
	for _, p := range []string{".secrets/nothere", "x-link", "sec-link/nothere"} {
		_, err := s.ReadFile(p)
		hidden("read", p, err)
	}
	for _, p := range []string{".secrets/nothere", "sec-link/nothere"} {
		err := s.tar(p, io.Discard, &LeftOut{})
		hidden("download", p, err)
		_, err = s.Resolve(p)
		hidden("resolve", p, err)
		hidden("exec dir", p, s.checkDir(p))
	}
	hidden("write", ".secrets/nodir/f", s.WriteFile(ctx, ".secrets/nodir/f", []byte("planted\n"), 0o644))
	hidden("mkdir", ".secrets/nodir/d", s.Mkdir(ctx, ".secrets/nodir/d"))
	if _, err := os.Lstat(filepath.Join(ws, ".secrets/nodir")); !os.IsNotExist(err) {
		t.Errorf(".secrets/nodir: %v, want none made", err)
	}

	ents, _, err := s.List(".")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]*FileInfo{}
	for _, e := range ents {
		names[e.Path] = e
	}
	if _, ok := names[".secrets"]; ok {
		t.Errorf("list .: %v holds the hidden directory", names)
	}
	// Positive control: the entries beside it, the links to it among
	// them (a command's lstat sees them too).
	for _, p := range []string{"src", "top.txt", "sec-link", "x-link"} {
		if names[p] == nil {
			t.Errorf("list .: %v, want %s", names, p)
		}
	}
	if e := names["top.txt"]; e != nil && (e.Type != "file" || e.Size != 4) {
		t.Errorf("list .: top.txt is %+v", e)
	}
	if fi, err := s.Stat("top.txt"); err != nil || fi.Type != "file" || fi.Size != 4 {
		t.Errorf("stat top.txt: %+v %v", fi, err)
	}
	if fi, err := s.Stat("x-link"); err != nil || fi.Type != "symlink" {
		t.Errorf("stat x-link: %+v %v", fi, err)
	}
	if fi, err := s.Stat("."); err != nil || fi.Type != "dir" {
		t.Errorf("stat .: %+v %v", fi, err)
	}
	for _, p := range []string{"nothere", "src/nothere", "src/nothere/deeper"} {
		if _, err := s.Stat(p); !errors.Is(err, ErrNoFile) {
			t.Errorf("stat %s: %v, want ErrNoFile", p, err)
		}
	}
	if ents, _, err := s.List("src"); err != nil || len(ents) != 1 || ents[0].Path != "src/main.go" {
		t.Errorf("list src: %v %v", ents, err)
	}
	if b, err := s.ReadFile("top.txt"); err != nil || string(b) != "top\n" {
		t.Errorf("read top.txt: %q %v", b, err)
	}
	if err := s.checkDir("src"); err != nil {
		t.Errorf("exec dir src: %v", err)
	}
}
