//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionReview: moat session diff shows an overlay session's
// changes; moat session apply refuses a protected path (exit 1, naming
// it) and applies the rest when asked for it; discard ends the review.
func TestSessionReview(t *testing.T) {
	sock, _ := startServe(t)
	ws := t.TempDir()
	code, out, errs := moat(t, ws, "session", "create", "--socket", sock, "--workspace", ws, "--workspace-mode", "overlay")
	if code != 0 && strings.Contains(errs, "overlay") {
		t.Skipf("overlayfs cannot be mounted here: %s", errs)
	}
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("session create: %d %q", code, errs)
	}
	if code, _, errs := moat(t, ws, "exec", "--socket", sock, id, "--", "sh", "-c", "echo hi > new; echo x > .envrc"); code != 0 {
		t.Fatalf("exec: %d %s", code, errs)
	}
	if code, out, errs := moat(t, ws, "session", "events", "--socket", sock, id); code != 0 || !strings.Contains(out, `"type":"run"`) || !strings.Contains(out, `"seq":1,`) {
		t.Errorf("session events: %d %q %q", code, out, errs)
	}
	if code, out, errs := moat(t, ws, "session", "diff", "--socket", sock, "--format", "summary", id); code != 0 || !strings.Contains(out, "new") || !strings.Contains(out, ".envrc") {
		t.Errorf("session diff: %d %q %q", code, out, errs)
	}
	if code, _, errs := moat(t, ws, "session", "apply", "--socket", sock, id); code != 1 || !strings.Contains(errs, ".envrc") {
		t.Errorf("session apply of a protected path: %d %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(ws, "new")); !os.IsNotExist(err) {
		t.Errorf("a refused apply wrote the workspace: %v", err)
	}
	if code, out, errs := moat(t, ws, "session", "apply", "--socket", sock, id, "new"); code != 0 || !strings.Contains(out, "new") {
		t.Errorf("session apply new: %d %q %q", code, out, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "new")); string(b) != "hi\n" {
		t.Errorf("new after apply: %q", b)
	}
	if code, _, errs := moat(t, ws, "session", "discard", "--socket", sock, id); code != 0 {
		t.Errorf("session discard: %d %q", code, errs)
	}
	if code, _, errs := moat(t, ws, "session", "diff", "--socket", sock, id); code != exitMoatError || !strings.Contains(errs, "session_ended") {
		t.Errorf("diff after discard: %d %q", code, errs)
	}
}
