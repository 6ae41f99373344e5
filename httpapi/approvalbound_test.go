//go:build linux

package httpapi_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// refusals returns the commands of the approval records refused for
// too many pending, once there are n of them.
func refusals(t *testing.T, rec *memAudit, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var got []string
		rec.mu.Lock()
		for _, r := range rec.recs {
			if r, ok := r.(audit.Approval); ok && r.Outcome == daemon.ApprovalTooMany {
				got = append(got, strings.Join(r.Command, " "))
			}
		}
		rec.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
	}
}

// pendingOf lists c's pending approvals of session id.
func pendingOf(t *testing.T, c *client.Client, id string) []client.Approval {
	t.Helper()
	list, err := c.Approvals(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []client.Approval
	for _, a := range list {
		if a.Session == id {
			out = append(out, a)
		}
	}
	return out
}

// TestPendingApprovalsBounded: asked commands sent to a session at once
// get as many pending approvals as its bound, and the rest are refused
// at once, without running (the refusals are audited); a tenant's
// sessions share its bound, another tenant's are not held by it, and an
// answer frees a slot for the next ask. (The programs one command starts
// are asked about one at a time, by the sandbox; requests sent at once
// are what can pile up.)
func TestPendingApprovalsBounded(t *testing.T) {
	tokens := aliceAndBob(t, "tok-a", "tok-b")
	rec := &memAudit{}
	d := startDaemon(t, daemon.Config{Approvals: true, ApprovalTimeout: time.Minute, MaxPending: 2, TenantPending: 3, Audit: rec}, tokens)
	ctx := context.Background()
	alice, bob := client.TCP(d.tcp, "tok-a"), client.TCP(d.tcp, "tok-b")
	defer alice.Close()
	defer bob.Close()
	newSession := func(c *client.Client) *client.Session {
		s, err := c.CreateSession(ctx, &client.CreateSessionRequest{Policy: shipPolicy})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1, s2, sb := newSession(alice), newSession(alice), newSession(bob)

	// Five asked commands at once in s1: two wait, three are refused.
	var flood []chan execResult
	for i := range 5 {
		flood = append(flood, execAsync(alice, s1.ID, "echo", "ship", strconv.Itoa(i)))
	}
	if got := refusals(t, rec, 3); len(got) != 3 {
		t.Fatalf("refused: %q, want 3", got)
	}
	var waiting []client.Approval
	for deadline := time.Now().Add(20 * time.Second); len(waiting) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		waiting = pendingOf(t, alice, s1.ID)
	}
	if len(waiting) != 2 {
		t.Fatalf("pending in s1: %d, want 2", len(waiting))
	}

	// s2 of the same tenant gets the tenant's third slot, and no more.
	third := execAsync(alice, s2.ID, "echo", "ship", "third")
	waitApproval(t, alice, "echo", "ship", "third")
	r := <-execAsync(alice, s2.ID, "echo", "ship", "fourth")
	if r.err != nil || r.rep.Reason != "denied" || r.out != "" || !strings.Contains(r.rep.Error, "too many approvals pending for this tenant (3): refused without asking") {
		t.Fatalf("fourth ask of the tenant: %+v %v", r.rep, r.err)
	}
	// Bob is not held by alice's bound.
	bobs := execAsync(bob, sb.ID, "echo", "ship", "bob")
	waitApproval(t, bob, "echo", "ship", "bob")

	// An answer frees a slot: the next ask in s2 waits again.
	if err := alice.Deny(ctx, waitApproval(t, alice, "echo", "ship", "third").ID, &client.DenyRequest{}); err != nil {
		t.Fatal(err)
	}
	if r := <-third; r.err != nil || r.rep.Reason != "denied" || strings.Contains(r.rep.Error, "too many") {
		t.Fatalf("denied third: %+v %v", r.rep, r.err)
	}
	again := execAsync(alice, s2.ID, "echo", "ship", "again")
	if err := alice.Approve(ctx, waitApproval(t, alice, "echo", "ship", "again").ID, &client.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	if r := <-again; r.err != nil || r.out != "ship again\n" {
		t.Fatalf("approved after a slot was freed: %+v %v", r.rep, r.err)
	}

	// The flood's waiting commands run once approved; the refused ones
	// ran nothing.
	for _, a := range waiting {
		if err := alice.Approve(ctx, a.ID, &client.ApproveRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	ran, refused := 0, 0
	for _, ch := range flood {
		switch r := <-ch; {
		case r.err == nil && r.rep.ExitCode == 0 && strings.HasPrefix(r.out, "ship "):
			ran++
		case r.err == nil && r.rep.Reason == "denied" && r.out == "" && strings.Contains(r.rep.Error, "too many approvals pending in this session (2): refused without asking"):
			refused++
		default:
			t.Errorf("flood: %q %+v %v", r.out, r.rep, r.err)
		}
	}
	if ran != 2 || refused != 3 {
		t.Errorf("flood: %d ran, %d refused; want 2 and 3", ran, refused)
	}
	if err := bob.Approve(ctx, waitApproval(t, bob, "echo", "ship", "bob").ID, &client.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	if r := <-bobs; r.err != nil || r.out != "ship bob\n" {
		t.Errorf("bob: %+v %v", r.rep, r.err)
	}
	if got := refusals(t, rec, 4); len(got) != 4 || got[3] != "echo ship fourth" {
		t.Errorf("refusals audited: %q", got)
	}
}
