//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeTemplates: moat serve checks its templates and pools at start
// (each problem located, exit 2); moat session create --template makes a
// session of one, from its warm pool with --temp.
func TestServeTemplates(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	os.Mkdir(bad, 0o700)
	os.WriteFile(filepath.Join(bad, "a.toml"), []byte("[limits]\nmemroy = 1\n"), 0o600)
	good := filepath.Join(dir, "good")
	os.Mkdir(good, 0o700)
	os.WriteFile(filepath.Join(good, "sh.toml"), []byte("[env.set]\nT = \"from-template\"\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--templates", bad}, "a.toml:2: limits.memroy: unknown key"},
		{[]string{"serve", "--templates", filepath.Join(dir, "none")}, "templates:"},
		{[]string{"serve", "--pool", "sh=1"}, "--pool needs --templates"},
		{[]string{"serve", "--templates", good, "--pool", "nope=1"}, `no template "nope"`},
		{[]string{"serve", "--templates", good, "--pool", "sh=lots"}, "want NAME=N"},
		{[]string{"serve", "--tenant-disk", "lots"}, "--tenant-disk"},
		{[]string{"session", "create", "--template", "sh", "--policy", "p.toml"}, "give one"},
	} {
		if code, _, errs := moat(t, dir, tc.args...); code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("moat %q: %d %q, want %q", tc.args, code, errs, tc.want)
		}
	}

	sock, logs := startServe(t, "--templates", good, "--pool", "sh=1")
	ws := t.TempDir()
	code, id, errs := moat(t, ws, "session", "create", "--socket", sock, "--template", "sh", "--temp")
	if code != 0 {
		t.Fatalf("session create --template: %d %q\n%s", code, errs, logs)
	}
	id = strings.TrimSpace(id)
	if code, out, errs := moat(t, ws, "exec", "--socket", sock, id, "--", "sh", "-c", "echo $T"); code != 0 || out != "from-template\n" {
		t.Errorf("exec in the template's session: %d %q %q", code, out, errs)
	}
	if code, _, errs := moat(t, ws, "session", "create", "--socket", sock, "--template", "nope", "--temp"); code == 0 || !strings.Contains(errs, `no template "nope"`) {
		t.Errorf("unknown template: %d %q", code, errs)
	}
}
