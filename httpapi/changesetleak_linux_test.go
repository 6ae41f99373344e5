package httpapi_test

import (
	"context"
	"errors"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/workspace"
)

// TestTempChangeSetsDiscarded: the change set of an overlay session in a
// workspace the daemon made goes with that workspace, however the session
// ends (deleted, or reviewed and then forgotten at shutdown). A token's
// tenant never reaches the host to discard it, and nobody can apply it
// once its workspace is gone: kept, every session would leave what its
// commands wrote on the daemon's disk for good, outside the tenant's disk
// quota. Controls: the change set is there while the session lives and
// while its review is kept (the diff shows the file), and the change set
// of a workspace of the tenant's own stays for moat apply on the host.
func TestTempChangeSetsDiscarded(t *testing.T) {
	tokens := aliceAndBob(t, "tok-a", "tok-b")
	d := startDaemon(t, daemon.Config{}, tokens)
	ctx := context.Background()
	alice := client.TCP(d.tcp, "tok-a")
	defer alice.Close()
	exists := func(id string) bool {
		_, err := workspace.Open(id)
		if err != nil && !errors.Is(err, workspace.ErrNotFound) {
			t.Fatalf("open change set %s: %v", id, err)
		}
		return err == nil
	}
	write := func(c *client.Client, id string) {
		if _, _, rep := run(t, c, id, &client.ExecRequest{Args: []string{"sh", "-c", "head -c 100000 /dev/zero > big"}}); rep.ExitCode != 0 {
			t.Fatalf("write: %+v", rep)
		}
	}

	deleted, err := alice.CreateSession(ctx, &client.CreateSessionRequest{WorkspaceMode: "overlay"})
	if err != nil {
		t.Fatal(err)
	}
	write(alice, deleted.ID)
	if deleted.ChangeSet == "" || !exists(deleted.ChangeSet) {
		t.Fatalf("positive control: the live session's change set %q is not there", deleted.ChangeSet)
	}
	if err := alice.DeleteSession(ctx, deleted.ID); err != nil {
		t.Fatal(err)
	}
	if exists(deleted.ChangeSet) {
		t.Errorf("the change set of a deleted session in a workspace the daemon made is left on disk")
	}

	reviewed, err := alice.CreateSession(ctx, &client.CreateSessionRequest{WorkspaceMode: "overlay"})
	if err != nil {
		t.Fatal(err)
	}
	write(alice, reviewed.ID)
	if diff, err := alice.Diff(ctx, reviewed.ID, "", nil); err != nil || len(diff) == 0 {
		t.Fatalf("positive control: the review's diff: %q, %v", diff, err)
	}
	if !exists(reviewed.ChangeSet) {
		t.Fatal("positive control: a change set kept for review is gone")
	}

	// The tenant's own workspace (a local user's, here the daemon's own):
	// its change set stays.
	own := d.create(t, &client.CreateSessionRequest{Workspace: t.TempDir(), WorkspaceMode: "overlay"})
	write(d.c, own.ID)
	if err := d.c.DeleteSession(ctx, own.ID); err != nil {
		t.Fatal(err)
	}
	if !exists(own.ChangeSet) {
		t.Errorf("the change set of a tenant's own workspace was discarded")
	}
	t.Cleanup(func() {
		if cs, err := workspace.Open(own.ChangeSet); err == nil {
			cs.Discard()
		}
	})

	if err := d.m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(reviewed.ChangeSet) {
		t.Errorf("the change set of a reviewed session in a workspace the daemon made outlives the daemon")
	}
}
