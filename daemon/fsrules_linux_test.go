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
	if err := s.Tar("keys", io.Discard); !errors.Is(err, ErrWorkspace) {
		t.Errorf("download keys: %v, want ErrWorkspace", err)
	}
	if err := s.WriteFile(ctx, ".env", []byte("TOKEN=planted\n"), 0o644); !errors.Is(err, ErrWorkspace) {
		t.Errorf("write .env: %v, want ErrWorkspace", err)
	}
	var buf bytes.Buffer
	if err := s.Tar(".", &buf); err != nil {
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
