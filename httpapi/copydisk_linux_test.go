package httpapi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// TestCopyUnderDiskRefusedForTenant: a daemon refuses a copy workspace
// under limits.disk before it copies anything (a workspace larger than the
// limit is not cut off as too large to copy), and tells the tenant what it
// can change: not --allow-degraded, which no request can pass. Controls:
// the same copy session without the limit is made and sees the workspace's
// file, and an overlay session under the same limit is made.
func TestCopyUnderDiskRefusedForTenant(t *testing.T) {
	tokens := aliceAndBob(t, "tok-a", "tok-b")
	d := startDaemon(t, daemon.Config{}, tokens)
	ctx := context.Background()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "big"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	alice := client.TCP(d.tcp, "tok-a")
	defer alice.Close()
	const disk = "[limits]\ndisk = \"2MiB\"\n"
	for _, c := range []struct {
		name string
		c    *client.Client
		ws   string
	}{{"the daemon's own user, its workspace", d.c, ws}, {"a token's tenant", alice, ""}} {
		s, err := c.c.CreateSession(ctx, &client.CreateSessionRequest{Policy: disk, Workspace: c.ws, WorkspaceMode: "copy"})
		if err == nil {
			c.c.DeleteSession(ctx, s.ID)
		}
		if apiCode(err) != client.CodeSandboxRefused || !strings.Contains(err.Error(), "copy workspace") ||
			!strings.Contains(err.Error(), `workspace_mode "overlay"`) || strings.Contains(err.Error(), "allow-degraded") ||
			strings.Contains(err.Error(), "too large") {
			t.Errorf("%s: %v, want a refusal before the copy that names workspace_mode and not --allow-degraded", c.name, err)
		}
	}

	s, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{Workspace: ws, WorkspaceMode: "copy"})
	if err != nil {
		t.Fatalf("positive control: the copy without limits.disk: %v", err)
	}
	if _, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"test", "-s", "big"}}); rep.ExitCode != 0 {
		t.Errorf("the copy has no big: %+v", rep)
	}
	d.c.DeleteSession(ctx, s.ID)
	s, err = alice.CreateSession(ctx, &client.CreateSessionRequest{Policy: disk, WorkspaceMode: "overlay"})
	if err != nil {
		t.Fatalf("positive control: an overlay under limits.disk: %v", err)
	}
	alice.DeleteSession(ctx, s.ID)
}

// TestCopyUnderDiskQuotaRefused: under a disk quota a copy workspace is
// refused before anything is copied (quota, not a copy cut off as too
// large), naming the copy and the modes that keep within the quota.
// Control: the same workspace under the same limit in an overlay is made,
// and its command sees the workspace's file.
func TestCopyUnderDiskQuotaRefused(t *testing.T) {
	tokens := aliceAndBob(t, "tok-a", "tok-b")
	d := startDaemon(t, daemon.Config{TenantDisk: 64 << 20}, tokens)
	ctx := context.Background()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "big"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	alice := client.TCP(d.tcp, "tok-a")
	defer alice.Close()
	const disk = "[limits]\ndisk = \"2MiB\"\n"
	for _, c := range []struct {
		name string
		c    *client.Client
		ws   string
	}{{"the daemon's own user, its workspace", d.c, ws}, {"a token's tenant", alice, ""}} {
		s, err := c.c.CreateSession(ctx, &client.CreateSessionRequest{Policy: disk, Workspace: c.ws, WorkspaceMode: "copy"})
		if err == nil {
			c.c.DeleteSession(ctx, s.ID)
		}
		if apiCode(err) != client.CodeQuota || !strings.Contains(err.Error(), `workspace's copy (workspace_mode "copy"`) ||
			!strings.Contains(err.Error(), `workspace_mode "overlay"`) || strings.Contains(err.Error(), "too large") {
			t.Errorf("%s: %v, want a quota refusal before the copy", c.name, err)
		}
	}
	s, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{Policy: disk, Workspace: ws, WorkspaceMode: "overlay"})
	if err != nil {
		t.Fatalf("positive control: an overlay under the same limit: %v", err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	if _, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"test", "-s", "big"}}); rep.ExitCode != 0 {
		t.Errorf("the overlay has no big: %+v", rep)
	}
}
