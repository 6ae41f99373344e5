package httpapi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// TestPooledSessionAudited: a session claimed from the warm pool sends its
// rules' decisions to the daemon's audit stream, as a session made cold
// does (the positive control: the same template in another workspace
// mode, which the pool does not match). A tenant must not leave the
// operator's audit by asking for a pooled template.
func TestPooledSessionAudited(t *testing.T) {
	dir := t.TempDir()
	pol := "[[rules]]\nname = \"no-push\"\nmatch = { command = [\"git\", \"push\"] }\ndecision = \"deny\"\nreason = \"pushes stay inside\"\n"
	os.WriteFile(filepath.Join(dir, "tpl.toml"), []byte(pol), 0o600)
	var mu sync.Mutex
	audited := 0 // decisions of the rule
	cfg := daemon.Config{Tick: 20 * time.Millisecond, Audit: decisionSink(func(r audit.Decision) {
		if strings.Contains(r.Rule, "no-push") {
			mu.Lock()
			audited++
			mu.Unlock()
		}
	})}
	if err := testTemplates(&cfg, dir, "tpl=1"); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, cfg, nil)
	for deadline := time.Now().Add(20 * time.Second); d.m.PoolSizes()["tpl"] < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool did not fill")
		}
	}
	warm := d.create(t, &client.CreateSessionRequest{Template: "tpl"})
	if n := d.m.PoolSizes()["tpl"]; n != 0 {
		t.Fatalf("the session was not claimed from the pool (%d left in it)", n)
	}
	cold := d.create(t, &client.CreateSessionRequest{Template: "tpl", WorkspaceMode: "overlay"})
	// How many of the rule's decisions reach the audit stream, each
	// session's in turn.
	count := func(s *client.Session) int {
		mu.Lock()
		before := audited
		mu.Unlock()
		_, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"git", "push"}})
		if rep.Reason != "denied" || !strings.Contains(rep.Error, "no-push") {
			t.Fatalf("session %s: the rule did not deny git push: %+v", s.ID, rep)
		}
		mu.Lock()
		defer mu.Unlock()
		return audited - before
	}
	if n := count(cold); n == 0 {
		t.Fatal("positive control: the cold session's denial is not in the audit stream")
	}
	if n := count(warm); n == 0 {
		t.Error("the pooled session's denial is not in the audit stream")
	}
	ctx := context.Background()
	d.c.DeleteSession(ctx, warm.ID)
	d.c.DeleteSession(ctx, cold.ID)
}
