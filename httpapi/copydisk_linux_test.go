package httpapi_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
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

// TestWorkspaceTmpfsFullIsDisk: a command that fails because the tmpfs
// the daemon mounted on a token tenant's empty workspace (its limits.disk)
// is full is reported as reason disk, as one that fills the sandbox's /tmp
// is (it said exit, with no limit hit: found by a tester). The controls: a
// write within the limit exits 0, and a failure of another kind once the
// space is freed says exit.
func TestWorkspaceTmpfsFullIsDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the daemon mounts a tmpfs on the workspace as root only (as an ordinary user it refuses the session: TestDiskQuota)")
	}
	tokens := aliceAndBob(t, "tok-a", "tok-b")
	d := startDaemon(t, daemon.Config{TenantDisk: 64 << 20}, tokens)
	ctx := context.Background()
	alice := client.TCP(d.tcp, "tok-a")
	defer alice.Close()
	s, err := alice.CreateSession(ctx, &client.CreateSessionRequest{Policy: "[limits]\ndisk = \"8MiB\"\n"})
	if err != nil && strings.Contains(err.Error(), "cannot id-map") {
		// Before Linux 6.3 (the QEMU guest's 6.1).
		t.Skipf("this kernel cannot id-map a tmpfs: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer alice.DeleteSession(ctx, s.ID)
	for _, c := range []struct {
		script, reason string
		disk           bool
	}{
		{"head -c 1048576 /dev/zero > small.bin", "exit", false},
		{"head -c 20971520 /dev/zero > ws.bin", "disk", true},
		{"rm -f ws.bin; exit 3", "exit", false},
	} {
		_, _, rep := run(t, alice, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", c.script}})
		if rep.Reason != c.reason || slices.Contains(rep.LimitsHit, "disk") != c.disk {
			t.Errorf("%s: reason %q, limits hit %q; want %q", c.script, rep.Reason, rep.LimitsHit, c.reason)
		}
	}
}
