package httpapi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/workspace"
)

// TestTempWorkspaceQuarantineGoes: what a command plants where a
// protected path belongs in the empty workspace the daemon made for its
// session is quarantined when the session ends, into the host's state
// directory, outside the tenant's disk quota. The workspace goes with the
// session, and so must that: else each session of a tenant leaves up to
// its limits.disk on the host's disk for good. The control: the planted
// file was written, and was in the workspace before the session ended.
func TestTempWorkspaceQuarantineGoes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon bounds an empty direct workspace with a tmpfs only as root")
	}
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state)
	d := startDaemon(t, daemon.Config{TenantDisk: 64 << 20}, nil)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{Policy: "[limits]\ndisk = \"8MiB\"\n"})
	if err != nil && strings.Contains(err.Error(), "cannot id-map") {
		t.Skip("this kernel cannot id-map a tmpfs:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	_, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "mkdir .vscode && dd if=/dev/zero of=.vscode/junk bs=1M count=4 2>/dev/null"}})
	if rep.ExitCode != 0 {
		t.Fatalf("control: the command could not write .vscode/junk: exit %d", rep.ExitCode)
	}
	if fi, err := d.c.Stat(ctx, s.ID, ".vscode/junk"); err != nil || fi.Size != 4<<20 {
		t.Fatalf("control: .vscode/junk in the workspace: %+v, %v", fi, err)
	}
	if err := d.c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	n, err := workspace.DirSize(filepath.Join(state, "quarantine"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if n > 1<<20 {
		t.Errorf("the session's end left %d bytes quarantined in the state directory from a workspace that is gone", n)
	}
}

// TestTempWorkspaceChangeSetGoes: the change set of an overlay session
// in the empty workspace the daemon made holds what its commands wrote,
// on the host's disk; the workspace, its lower layer, goes when the
// session is deleted, and nothing can apply the change set after that.
// It must go too, or each such session leaves what it wrote (up to its
// limits.disk under a quota) there for good, outside the tenant's quota. The control: the change
// set held the write while the session lived.
func TestTempWorkspaceChangeSetGoes(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state)
	// No disk limit: the writes land in the change set as they are made
	// (under one, at the session's end), where the control sees them.
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{WorkspaceMode: "overlay"})
	_, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"dd", "if=/dev/zero", "of=junk", "bs=1M", "count=4"}})
	if rep.ExitCode != 0 {
		t.Fatalf("control: the command could not write: exit %d", rep.ExitCode)
	}
	runs := filepath.Join(state, "runs")
	if n, _ := workspace.DirSize(runs); n < 4<<20 {
		t.Fatalf("control: the change sets hold %d bytes, want the 4MiB written", n)
	}
	if err := d.c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if n, _ := workspace.DirSize(runs); n > 1<<20 {
		t.Errorf("the session's end left %d bytes of change set in the state directory, for a workspace that is gone", n)
	}
}
