package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// failingSink is a daemon.AuditSink whose writes fail once fail is set,
// as a stream on a full disk does.
type failingSink struct{ fail atomic.Bool }

func (f *failingSink) Write(any) error {
	if f.fail.Load() {
		return errors.New("write audit stream: no space left on device")
	}
	return nil
}

// TestUnrecordedActionsRefused: once the daemon's audit stream fails, what
// a session's rules decide is refused rather than done unrecorded: a
// command line an allow rule names, and a write an allow rule names,
// each refused as "denied" saying the record could not be written;
// what no rule decides (nothing to record) still runs. The control: the
// same line and write go through while the stream takes records.
func TestUnrecordedActionsRefused(t *testing.T) {
	sink := &failingSink{}
	d := startDaemon(t, daemon.Config{Audit: sink}, nil)
	ctx := context.Background()
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	pol := `
[[rules]]
name = "echo-ok"
match = { command = ["echo"] }
decision = "allow"

[[rules]]
name = "notes-ok"
match = { write = "notes/**" }
decision = "allow"
`
	s := d.create(t, &client.CreateSessionRequest{Policy: pol, Workspace: ws})
	// The control: recorded, both go through.
	if out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"echo", "recorded"}}); out != "recorded\n" || rep.ExitCode != 0 {
		t.Fatalf("control exec: %q, %+v", out, rep)
	}
	if err := d.c.WriteFile(ctx, s.ID, "notes/a.txt", []byte("a"), 0o644); err != nil {
		t.Fatalf("control write: %v", err)
	}

	sink.fail.Store(true)
	// The first record that fails is of this plain command's end (the
	// session's events): nothing a rule decided, so it runs.
	if out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"true"}}); out != "" || rep.ExitCode != 0 {
		t.Fatalf("exec no rule decides: %q, %+v", out, rep)
	}
	out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"echo", "unrecorded"}})
	if out != "" || rep.Reason != "denied" || !strings.Contains(rep.Error, "refused because its record could not be written to the audit stream (write audit stream: no space left on device)") {
		t.Errorf("exec an allow rule decides, unrecorded: %q, reason %q, error %q", out, rep.Reason, rep.Error)
	}
	err := d.c.WriteFile(ctx, s.ID, "notes/b.txt", []byte("b"), 0o644)
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusForbidden || e.Code != client.CodeDenied || !strings.Contains(e.Message, "could not be written to the audit stream") {
		t.Errorf("write an allow rule decides, unrecorded: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes", "b.txt")); err == nil {
		t.Error("the unrecorded write was made")
	}
	if err := d.c.WriteFile(ctx, s.ID, "c.txt", []byte("c"), 0o644); err != nil {
		t.Errorf("a write no rule decides: %v", err)
	}
}
