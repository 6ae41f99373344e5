//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/sandbox"
)

// TestSessionPolicyFileReadOnly: moat session create --policy F, with F in
// the workspace, is F's as moat run --policy F is: its relative profile
// and secret program are found beside it (the program starts at /, not
// in the workspace, where a command could have written what it reads
// unnamed), and a session's command can rewrite none of them, where it
// writes the file beside them (the control).
func TestSessionPolicyFileReadOnly(t *testing.T) {
	if sandbox.SeccompNativeArch() == "" {
		t.Skip("no seccomp filters for this architecture")
	}
	sock, logs := startServe(t)
	ws := t.TempDir()
	ci := filepath.Join(ws, "ci")
	os.Mkdir(ci, 0o755)
	pwdFile := filepath.Join(t.TempDir(), "pwd")
	doc := `[network]
mode = "allow"
allow = ["api.test"]

[syscalls]
profile = "profile.json"

[[secrets]]
name = "TOKEN"
source = "command:./mint.sh ` + pwdFile + `"
hosts = ["api.test"]
`
	const profile = `{"defaultAction": "SCMP_ACT_ALLOW"}`
	const mint = "#!/bin/sh\npwd > \"$1\"\necho value\n"
	files := map[string]string{"moat.toml": doc, "profile.json": profile, "mint.sh": mint}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(ci, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := moat(t, ws, "session", "create", "--socket", sock, "--policy", "ci/moat.toml")
	id := strings.TrimSpace(out)
	if code != 0 || len(id) != 16 {
		t.Fatalf("session create: %d %q %q\n%s", code, out, errs, logs)
	}
	if b, _ := os.ReadFile(pwdFile); string(b) != "/\n" {
		t.Errorf("the secret's program ran in %q, want /, not the policy's directory %s in the workspace", b, ci)
	}
	script := "echo x > ci/other.txt && echo WROTE"
	for name := range files {
		script += "; echo planted > ci/" + name + " || echo REFUSED-" + name
	}
	code, out, errs = moat(t, ws, "exec", "--socket", sock, id, "--", "sh", "-c", script+"; true")
	if b, _ := os.ReadFile(filepath.Join(ci, "other.txt")); code != 0 || string(b) != "x\n" || !strings.Contains(out, "WROTE") {
		t.Fatalf("control: the file beside the policy was not written: %q (code %d out %q err %q)", b, code, out, errs)
	}
	for name, body := range files {
		if b, _ := os.ReadFile(filepath.Join(ci, name)); string(b) != body || !strings.Contains(out, "REFUSED-"+name) {
			t.Errorf("the session's command rewrote ci/%s: %q (out %q)", name, b, out)
		}
	}
}
