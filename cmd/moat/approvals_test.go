//go:build linux

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestApprovalCommands: moat exec waits on an ask; moat approvals lists
// it, moat approve lets it run, moat deny refuses the next; the webhook
// hears of each, and the audit stream records who answered.
func TestApprovalCommands(t *testing.T) {
	hooks := make(chan map[string]any, 4)
	wh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev map[string]any
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &ev)
		hooks <- ev
	}))
	defer wh.Close()
	dir := t.TempDir()
	auditFile := filepath.Join(dir, "audit.jsonl")
	sock, _ := startServe(t, "--approval-webhook", wh.URL, "--audit", auditFile, "--approval-timeout", "1m")
	pf := filepath.Join(dir, "p.toml")
	os.WriteFile(pf, []byte("[[rules]]\nname = \"ship\"\nmatch = { command = [\"echo\", \"ship\"] }\ndecision = \"ask\"\nreason = \"it leaves\"\n"), 0o644)
	code, out, errs := moat(t, dir, "session", "create", "--socket", sock, "--temp", "--policy", pf)
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("session create: %d %q", code, errs)
	}
	type result struct {
		code      int
		out, errs string
	}
	exec := func(args ...string) chan result {
		ch := make(chan result, 1)
		go func() {
			code, out, errs := moat(t, dir, append([]string{"exec", "--socket", sock, id, "--"}, args...)...)
			ch <- result{code, out, errs}
		}()
		return ch
	}
	waitID := func() string {
		t.Helper()
		select {
		case ev := <-hooks:
			if ev["event"] != "approval.pending" || ev["rule"] == "" || ev["session"] != id {
				t.Errorf("webhook: %v", ev)
			}
			return ev["id"].(string)
		case <-time.After(30 * time.Second):
			t.Fatal("no webhook")
		}
		return ""
	}

	res := exec("echo", "ship", "it")
	aid := waitID()
	code, out, _ = moat(t, dir, "approvals", "--socket", sock)
	if code != 0 || !strings.Contains(out, aid) || !strings.Contains(out, `["echo" "ship" "it"]`) || !strings.Contains(out, "ship") {
		t.Errorf("moat approvals: %d %q", code, out)
	}
	if code, _, errs := moat(t, dir, "approve", "--socket", sock, "--scope", "prefix", "--prefix", "rm -rf", aid); code != exitMoatError || !strings.Contains(errs, "approval_refused") {
		t.Errorf("approve a prefix not shown: %d %q", code, errs)
	}
	if code, _, errs := moat(t, dir, "approve", "--socket", sock, "--reason", "release", aid); code != 0 {
		t.Fatalf("moat approve: %d %q", code, errs)
	}
	if r := <-res; r.code != 0 || r.out != "ship it\n" {
		t.Errorf("approved exec: %+v", r)
	}
	if code, _, errs := moat(t, dir, "approve", "--socket", sock, aid); code != exitMoatError || !strings.Contains(errs, "not_found") {
		t.Errorf("approved twice: %d %q", code, errs)
	}

	res = exec("echo", "ship", "again")
	aid = waitID()
	if code, _, errs := moat(t, dir, "deny", "--socket", sock, "--reason", "not today", aid); code != 0 {
		t.Fatalf("moat deny: %d %q", code, errs)
	}
	if r := <-res; r.code != exitMoatError || r.out != "" || !strings.Contains(r.errs, "ship") || !strings.Contains(r.errs, "not today") {
		t.Errorf("denied exec: %+v", r)
	}
	if code, out, _ := moat(t, dir, "approvals", "--socket", sock); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("nothing waits: %d %q", code, out)
	}
	if code, _, errs := moat(t, dir, "approvals", "--socket", sock, "--web"); code != exitMoatError || !strings.Contains(errs, "no TCP listener") {
		t.Errorf("--web without a TCP listener: %d %q", code, errs)
	}

	code, out, errs = moat(t, dir, "audit", "verify", auditFile)
	if code != 0 {
		t.Errorf("audit verify: %d %q %q", code, out, errs)
	}
	data, _ := os.ReadFile(auditFile)
	for _, want := range []string{`"type":"approval"`, `"outcome":"approved"`, `"why":"release"`, `"outcome":"denied"`, `"why":"not today"`, `"type":"decision"`, `"approver":"api"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the audit stream lacks %s:\n%s", want, data)
		}
	}
}
