package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// refusedAtOnce waits for the answer of an ask that must be refused
// without waiting for anybody, and returns its error.
func refusedAtOnce(t *testing.T, res chan asked) error {
	t.Helper()
	select {
	case r := <-res:
		if r.g != nil || !errors.Is(r.err, ErrTooManyPending) {
			t.Fatalf("ask beyond the bound: %+v", r)
		}
		return r.err
	case <-time.After(2 * time.Second):
		t.Fatal("an ask beyond the bound was queued")
		return nil
	}
}

// TestApprovalsBounded: a session and a tenant hold at most so many
// pending approvals; the ask past either bound is refused at once and
// audited, and once a pending one ends (here: times out) a new ask is
// queued again. Another tenant has its own bound.
func TestApprovalsBounded(t *testing.T) {
	rec := &memAudit{}
	m, err := New(Config{StateDir: t.TempDir(), Engine: newFake, Approvals: true, ApprovalTimeout: time.Minute,
		MaxPending: 2, TenantPending: 3, Audit: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	ctx := context.Background()
	a, b := TokenTenant("a"), TokenTenant("b")
	newSession := func(tn Tenant) *Session {
		s, err := m.Create(ctx, tn, &CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1, s2, sb := newSession(a), newSession(a), newSession(b)

	// The session's bound: two wait, the third is refused.
	ask(ctx, s1, []string{"git", "push", "1"})
	ask(ctx, s1, []string{"git", "push", "2"})
	pending(t, m, a, 2)
	err = refusedAtOnce(t, ask(ctx, s1, []string{"git", "push", "3"}))
	if want := "too many approvals pending in this session (2): refused without asking"; err.Error() != want {
		t.Errorf("refusal: %q, want %q", err, want)
	}

	// The tenant's bound spans its sessions: s2 gets the third slot,
	// not a fourth. An ask with a short deadline makes the positive
	// control below: it times out.
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	short := ask(tctx, s2, []string{"git", "push", "4"})
	pending(t, m, a, 3)
	err = refusedAtOnce(t, ask(ctx, s2, []string{"git", "push", "5"}))
	if !strings.Contains(err.Error(), "for this tenant (3)") {
		t.Errorf("tenant refusal: %q", err)
	}
	// Another tenant is not held by a's.
	ask(ctx, sb, []string{"git", "push", "b"})
	if p := pending(t, m, b, 1); p.Session != sb.ID {
		t.Errorf("b's approval: %+v", p)
	}

	// Once a pending approval ends, its slot is free again.
	if r := <-short; r.g != nil || r.err == nil {
		t.Fatalf("short ask: %+v", r)
	}
	ask(ctx, s2, []string{"git", "push", "6"})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		l := m.Approvals(a)
		if len(l) == 3 && strings.Join(l[2].Argv, " ") == "git push 6" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ask after a slot was freed is not pending: %d pending", len(l))
		}
	}

	var got []string
	for _, r := range rec.approvals() {
		got = append(got, r.Outcome+" "+strings.Join(r.Command, " "))
		if r.Outcome == ApprovalTooMany && (r.ID == "" || r.Tenant != "token:a" || r.Rule != "ship") {
			t.Errorf("refusal record: %+v", r)
		}
	}
	want := "too many pending git push 3, too many pending git push 5, timeout git push 4"
	if strings.Join(got, ", ") != want {
		t.Errorf("audit: %q, want %q", strings.Join(got, ", "), want)
	}
}

// TestApprovalNotesPlainText: a deny or approve whose name or reason
// holds a control sequence is refused (it reached the asker's terminal
// raw, found by a tester), and the approval stays pending; the control:
// the same deny in plain text answers it.
func TestApprovalNotesPlainText(t *testing.T) {
	m, err := New(Config{StateDir: t.TempDir(), Engine: newFake, Approvals: true, ApprovalTimeout: time.Minute, Audit: &memAudit{}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	ctx := context.Background()
	a := TokenTenant("a")
	s, err := m.Create(ctx, a, &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	done := ask(ctx, s, []string{"git", "push"})
	p := pending(t, m, a, 1)
	for _, bad := range [][2]string{{"", "\x1b]0;OWNED\x07"}, {"\x1b[31mred", ""}, {"", "line\nmoat: fake"}, {"", "\u202eevil"}, {"", "line\u2028sep"}} {
		if _, err := m.Deny(a, p.ID, bad[0], bad[1]); !errors.Is(err, ErrBadRequest) {
			t.Errorf("deny %q: %v, want a bad request", bad, err)
		}
		if _, err := m.Approve(a, p.ID, ApproveRequest{Name: bad[0], Why: bad[1]}); !errors.Is(err, ErrBadRequest) {
			t.Errorf("approve %q: %v, want a bad request", bad, err)
		}
	}
	pending(t, m, a, 1)
	if _, err := m.Deny(a, p.ID, "ops", "not now"); err != nil {
		t.Fatalf("plain deny: %v", err)
	}
	if r := <-done; r.err == nil || !strings.Contains(r.err.Error(), "not now") {
		t.Errorf("the asker got %+v", r)
	}
}
