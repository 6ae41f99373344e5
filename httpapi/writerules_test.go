//go:build linux

package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// TestWriteRules: the policy's write rules decide what the files API
// changes: a write, a removal or a directory the rules deny is refused
// with the stable code "denied" naming the rule, and nothing changes; an
// ask with nobody to ask is refused the same way; a link inside the
// workspace does not carry a write past a rule; a tar upload with one
// denied path is refused whole; every refusal is audited. Positive
// control: a path no rule matches is written.
func TestWriteRules(t *testing.T) {
	var mu sync.Mutex
	var recs []audit.Decision
	d := startDaemon(t, daemon.Config{Audit: decisionSink(func(r audit.Decision) { mu.Lock(); recs = append(recs, r); mu.Unlock() })}, nil)
	ctx := context.Background()
	ws := t.TempDir()
	for _, dir := range []string{"deploy", "src"} {
		if err := os.Mkdir(filepath.Join(ws, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(ws, "deploy", "old.yaml"), []byte("x"), 0o644)
	os.Symlink("deploy", filepath.Join(ws, "to-deploy"))
	pol := `
[[rules]]
name = "no-deploy"
match = { write = "deploy/**" }
decision = "deny"
reason = "deploy files go live"
examples_match = ["deploy/app.yaml"]

[[rules]]
name = "env-asks"
match = { write = "**/*.env" }
decision = "ask"
reason = "secrets"
`
	s := d.create(t, &client.CreateSessionRequest{Policy: pol, Workspace: ws})
	denied := func(what string, err error, rule string) {
		t.Helper()
		var e *client.Error
		if !errors.As(err, &e) || e.Status != http.StatusForbidden || e.Code != client.CodeDenied || !strings.Contains(e.Message, rule) {
			t.Errorf("%s: %v, want a 403 %q naming %s", what, err, client.CodeDenied, rule)
		}
	}
	denied("write", d.c.WriteFile(ctx, s.ID, "deploy/app.yaml", []byte("x"), 0o644), "no-deploy")
	denied("remove", d.c.RemoveFile(ctx, s.ID, "deploy/old.yaml"), "no-deploy")
	denied("through a link", d.c.WriteFile(ctx, s.ID, "to-deploy/app.yaml", []byte("x"), 0o644), "no-deploy")
	denied("ask", d.c.WriteFile(ctx, s.ID, "src/.env", []byte("x"), 0o644), "env-asks")
	for _, p := range []string{"deploy/app.yaml", "src/.env"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "deploy", "old.yaml")); err != nil {
		t.Errorf("deploy/old.yaml was removed: %v", err)
	}
	// Control.
	if err := d.c.WriteFile(ctx, s.ID, "src/main.go", []byte("package main\n"), 0o644); err != nil {
		t.Errorf("a write no rule matches: %v", err)
	}
	// An upload is decided path by path before anything is written: one
	// denied path refuses it whole.
	_, err := d.c.UploadTar(ctx, s.ID, ".", mkTar(t, reg("src/up.txt"), reg("deploy/up.yaml")))
	denied("tar upload", err, "no-deploy")
	_, err = d.c.UploadTar(ctx, s.ID, "deploy", mkTar(t, reg("x.txt")))
	denied("tar upload into a denied directory", err, "no-deploy")
	for _, p := range []string{"src/up.txt", "deploy/up.yaml", "deploy/x.txt"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s was written by a refused upload", p)
		}
	}
	// Control.
	if rep, err := d.c.UploadTar(ctx, s.ID, "src", mkTar(t, reg("a/b.txt"))); err != nil || rep.Entries != 1 {
		t.Errorf("an upload no rule refuses: %+v %v", rep, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(recs) != 6 {
		t.Fatalf("audit: %d records, want 6: %+v", len(recs), recs)
	}
	for _, r := range recs {
		if r.At != "write" || r.RunID != s.ID || r.Rule == "" || len(r.Command) != 2 {
			t.Errorf("audit record: %+v", r)
		}
	}
}

// decisionSink is a daemon.AuditSink that hands the decision records
// to a func.
type decisionSink func(audit.Decision)

func (f decisionSink) Write(rec any) error {
	if d, ok := rec.(audit.Decision); ok {
		f(d)
	}
	return nil
}
