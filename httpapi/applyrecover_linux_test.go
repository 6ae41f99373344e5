//go:build linux

package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// killableDaemon starts a daemon process (daemonProcess) on a fresh state
// directory and waits until it answers; start starts another on the
// same directory.
func killableDaemon(t *testing.T, prefix string) (state string, start func() (*exec.Cmd, *client.Client)) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	state, sock := filepath.Join(dir, "state"), filepath.Join(dir, "moat.sock")
	return state, func() (*exec.Cmd, *client.Client) {
		os.Remove(sock) // a killed daemon leaves its socket
		cmd, c := daemonProcess(t, state, sock)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := c.Sessions(context.Background()); err == nil {
				return cmd, c
			}
			if time.Now().After(deadline) {
				t.Fatal("the daemon does not answer")
			}
		}
	}
}

// TestInterruptedApplySaid: a daemon killed while it applies a change set
// into a tenant's workspace leaves it half applied; the next daemon,
// taking up the change set kept for review, finishes or rolls the apply
// back, and now says so: a log line and an audit record (a session
// record, event "recovered") naming the session, the change set, the
// workspace and what it did. Before, it rolled the workspace back
// unseen. The workspace then holds all the changes or none. The control:
// a start that finds no interrupted apply says nothing of one.
func TestInterruptedApplySaid(t *testing.T) {
	const n = 1000
	state, start := killableDaemon(t, "moat-applyrecover-")
	ctx := context.Background()
	first, c := start()
	ws := t.TempDir()
	for i := range n {
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%d", i)), []byte(fmt.Sprintf("orig%d\n", i)), 0o644)
	}
	s, err := c.CreateSession(ctx, &client.CreateSessionRequest{Workspace: ws, WorkspaceMode: "overlay"})
	if apiCode(err) == client.CodeSandboxRefused && strings.Contains(err.Error(), "overlay") {
		t.Skipf("overlayfs cannot be mounted here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo new$i > f$i; i=$((i+1)); done; mkdir d; i=0; while [ $i -lt %d ]; do echo x > d/n$i; i=$((i+1)); done`, n, n)
	run(t, c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", script}})
	go c.Apply(ctx, s.ID, &client.ApplyRequest{})
	journal := filepath.Join(state, "runs", s.ChangeSet, "journal")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Millisecond) {
		if _, err := os.Lstat(journal); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no apply journal")
		}
	}
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	if _, err := os.Lstat(journal); err != nil {
		t.Skip("the apply ended before the daemon was killed")
	}

	// newDaemon starts a daemon on state in this process, with its log
	// and audit stream, and stops it. Its store of change sets is the
	// one of the daemon killed.
	t.Setenv("MOAT_STATE_DIR", state)
	stream := filepath.Join(t.TempDir(), "audit.jsonl")
	newDaemon := func() (logs string, recs []audit.SessionEvent) {
		aw, err := audit.Open(stream)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		m, err := daemon.New(daemon.Config{StateDir: state, Audit: aw, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
		if err != nil {
			t.Fatal(err)
		}
		m.Shutdown(ctx)
		aw.Close()
		data, _ := os.ReadFile(stream)
		for _, line := range strings.Split(string(data), "\n") {
			var r audit.SessionEvent
			if json.Unmarshal([]byte(line), &r) == nil && r.Type == audit.TypeSession && r.Event == "recovered" {
				recs = append(recs, r)
			}
		}
		return buf.String(), recs
	}
	logs, recs := newDaemon()
	if _, err := os.Lstat(journal); err == nil {
		t.Error("the next daemon left the apply's journal")
	}
	// All or none.
	applied := 0
	for i := range n {
		if b, _ := os.ReadFile(filepath.Join(ws, fmt.Sprintf("f%d", i))); string(b) == fmt.Sprintf("new%d\n", i) {
			applied++
		}
	}
	ents, _ := os.ReadDir(filepath.Join(ws, "d"))
	outcome := ""
	switch {
	case applied == n && len(ents) == n:
		outcome = "completed"
	case applied == 0 && len(ents) == 0:
		outcome = "rolled back"
	default:
		t.Errorf("the workspace is half applied: %d of %d files, %d entries of d/", applied, n, len(ents))
	}
	if left, _ := filepath.Glob(filepath.Join(ws, ".moat-*")); len(left) > 0 {
		t.Errorf("left in the workspace: %q", left)
	}
	if !strings.Contains(logs, `"msg":"interrupted apply `+outcome+`"`) || !strings.Contains(logs, s.ChangeSet) || !strings.Contains(logs, s.ID) {
		t.Errorf("the daemon's log does not say the apply was %s:\n%s", outcome, logs)
	}
	if len(recs) != 1 || recs[0].Session != s.ID || recs[0].Tenant == "" || recs[0].Reason != "apply "+outcome ||
		recs[0].Workspace == "" || len(recs[0].Warnings) != 1 || !strings.Contains(recs[0].Warnings[0], s.ChangeSet) {
		t.Errorf("the audit stream's record of the recovery: %+v, want one of session %s, apply %s", recs, s.ID, outcome)
	}
	// The control: nothing more to recover, nothing said.
	logs, recs = newDaemon()
	if strings.Contains(logs, "interrupted apply") || len(recs) != 1 {
		t.Errorf("a start with no interrupted apply: %d records of a recovery, log:\n%s", len(recs), logs)
	}
}

// TestReapedEmptyChangeSetDiscarded: the change set of an overlay session
// that wrote nothing, live when its daemon was killed, is discarded by
// the next daemon, as the session's end would have discarded it; before,
// it was kept for review, and each daemon killed added one more to the
// tenant's reviews (found by the red team). The control: that of a
// session that wrote a file is kept, and reviewable.
func TestReapedEmptyChangeSetDiscarded(t *testing.T) {
	state, start := killableDaemon(t, "moat-reapempty-")
	ctx := context.Background()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "old"), []byte("a\n"), 0o644)
	reviews := func() []string {
		all, _ := filepath.Glob(filepath.Join(state, "daemon", "reviews", "*.json"))
		return all
	}
	d, c := start()
	s, err := c.CreateSession(ctx, &client.CreateSessionRequest{Workspace: ws, WorkspaceMode: "overlay"})
	if apiCode(err) == client.CodeSandboxRefused && strings.Contains(err.Error(), "overlay") {
		t.Skipf("overlayfs cannot be mounted here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	run(t, c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo b > old; echo n > new"}})
	kept := s
	var empties []*client.Session
	for cycle := range 2 {
		e, err := c.CreateSession(ctx, &client.CreateSessionRequest{Workspace: ws, WorkspaceMode: "overlay"})
		if err != nil {
			t.Fatal(err)
		}
		run(t, c, e.ID, &client.ExecRequest{Args: []string{"cat", "old"}})
		empties = append(empties, e)
		d.Process.Signal(syscall.SIGKILL)
		d.Wait()
		d, c = start()
		if got := reviews(); len(got) != 1 || !strings.HasSuffix(got[0], kept.ID+".json") {
			t.Errorf("after %d daemons killed, the reviews kept: %q, want only %s's", cycle+1, got, kept.ID)
		}
	}
	for _, e := range empties {
		if _, err := os.Stat(filepath.Join(state, "runs", e.ChangeSet)); !os.IsNotExist(err) {
			t.Errorf("the empty change set %s of a reaped session is kept: %v", e.ChangeSet, err)
		}
		if _, err := c.Diff(ctx, e.ID, "summary", nil); apiCode(err) != client.CodeEnded {
			t.Errorf("the diff of a reaped session that wrote nothing: %v", err)
		}
	}
	if diff, err := c.Diff(ctx, kept.ID, "summary", nil); err != nil || !strings.Contains(string(diff), "new") || !strings.Contains(string(diff), "old") {
		t.Errorf("control: the diff of a reaped session that wrote: %v %q", err, diff)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "old")); string(b) != "a\n" {
		t.Errorf("the workspace was written: %q", b)
	}
}
