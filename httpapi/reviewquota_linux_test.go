package httpapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// TestReviewsCountInDiskQuota: the change set an ended session keeps for
// review holds what its commands wrote on the daemon's disk, beyond the
// tmpfs its limits.disk bounded; under a disk quota it counts against the
// tenant's until it is discarded or applied, or a tenant could keep a
// change set of each of many sessions, one after the other. Controls: the
// same session fits before the review and after the discard.
func TestReviewsCountInDiskQuota(t *testing.T) {
	tokens := aliceAndBob(t, "tok-a", "tok-b")
	d := startDaemon(t, daemon.Config{TenantDisk: 12 << 20}, tokens)
	ctx := context.Background()
	alice := client.TCP(d.tcp, "tok-a")
	defer alice.Close()
	req := &client.CreateSessionRequest{Policy: "[limits]\ndisk = \"8MiB\"\n", WorkspaceMode: "overlay"}
	s, err := alice.CreateSession(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, rep := run(t, alice, s.ID, &client.ExecRequest{Args: []string{"dd", "if=/dev/zero", "of=big", "bs=1M", "count=6"}}); rep.ExitCode != 0 {
		t.Fatalf("positive control: 6MiB in an overlay workspace of 8MiB: %+v", rep)
	}
	if diff, err := alice.Diff(ctx, s.ID, "", nil); err != nil || len(diff) == 0 {
		t.Fatalf("the review: %q, %v", diff, err)
	}
	// 6MiB kept for review and 8MiB more are over 12MiB.
	over, err := alice.CreateSession(ctx, req)
	if apiCode(err) != client.CodeQuota || !strings.Contains(err.Error(), "review") || !strings.Contains(err.Error(), s.ID) {
		t.Errorf("a session of 8MiB with 6MiB kept for review under 12MiB: %v", err)
	}
	if err == nil {
		alice.DeleteSession(ctx, over.ID)
	}
	// Another tenant's quota is its own.
	bob := client.TCP(d.tcp, "tok-b")
	defer bob.Close()
	if _, err := bob.CreateSession(ctx, req); err != nil {
		t.Errorf("another tenant's session: %v", err)
	}
	if err := alice.Discard(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CreateSession(ctx, req); err != nil {
		t.Errorf("positive control: the quota freed by the discard: %v", err)
	}
}
