package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/harness"
)

type memAudit struct {
	mu   sync.Mutex
	recs []any
}

func (a *memAudit) Write(v any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, v)
	return nil
}

func (a *memAudit) approvals() []audit.Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []audit.Approval
	for _, r := range a.recs {
		if ap, ok := r.(audit.Approval); ok {
			out = append(out, ap)
		}
	}
	return out
}

type asked struct {
	g   *harness.Grant
	err error
}

// ask asks s's approver about argv, as the sandbox does, in the
// background.
func ask(ctx context.Context, s *Session, argv []string) chan asked {
	d := harness.Decision{Verdict: harness.Ask, Rule: &harness.RuleRef{Set: harness.SetPolicy, Name: "ship"}, Reason: "it leaves", Command: argv}
	ch := make(chan asked, 1)
	go func() {
		g, err := s.approver().(queueApprover).ApproveScoped(ctx, harness.Action{Argv: argv, Dir: "/ws"}, d)
		ch <- asked{g, err}
	}()
	return ch
}

// pending waits for t's n-th pending approval.
func pending(t *testing.T, m *Manager, tn Tenant, n int) *Approval {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if l := m.Approvals(tn); len(l) >= n {
			return l[n-1]
		}
	}
	t.Fatalf("no pending approval %d", n)
	return nil
}

func TestApprovals(t *testing.T) {
	hooks := make(chan WebhookEvent, 4)
	wh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev WebhookEvent
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &ev); err != nil || r.Method != "POST" {
			t.Errorf("webhook: %s %s: %v", r.Method, body, err)
		}
		hooks <- ev
	}))
	defer wh.Close()
	rec := &memAudit{}
	m, err := New(Config{StateDir: t.TempDir(), Engine: newFake, Approvals: true, ApprovalTimeout: time.Minute, ApprovalWebhook: wh.URL, Audit: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	ctx := context.Background()
	a, b := TokenTenant("a"), TokenTenant("b")
	s, err := m.Create(ctx, a, &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}

	// Approved once: the grant is the exact command, by the tenant.
	res := ask(ctx, s, []string{"git", "push", "origin"})
	p := pending(t, m, a, 1)
	if !slices.Equal(p.Argv, []string{"git", "push", "origin"}) || p.Dir != "/ws" || p.Session != s.ID || p.Rule != "ship" || p.Reason != "it leaves" {
		t.Errorf("pending approval: %+v", p)
	}
	if ev := <-hooks; ev.ID != p.ID || ev.Rule != "ship" || ev.Event != "approval.pending" || !slices.Equal(ev.Command, p.Argv) {
		t.Errorf("webhook event: %+v", ev)
	}
	// Another tenant neither sees it nor answers it (positive control:
	// its own tenant does, below).
	if l := m.Approvals(b); len(l) != 0 {
		t.Errorf("tenant b sees %d approvals of a", len(l))
	}
	if _, err := m.Approve(b, p.ID, ApproveRequest{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("tenant b approves a's: %v", err)
	}
	if _, err := m.Deny(b, p.ID, "", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("tenant b denies a's: %v", err)
	}
	// The tenant's own credential limited to its sessions neither sees
	// nor answers it, and one limited to approvals sees it but reaches
	// no session (positive controls: the same calls of a, above and
	// below, and of the approvals credential for the list).
	agent, person := TokenTenantRole("a", RoleSessions), TokenTenantRole("a", RoleApprovals)
	if l := m.Approvals(agent); len(l) != 0 {
		t.Errorf("a's sessions-only credential sees %d approvals", len(l))
	}
	if _, err := m.Approve(agent, p.ID, ApproveRequest{}); !errors.Is(err, ErrForbidden) {
		t.Errorf("a's sessions-only credential approves: %v", err)
	}
	if _, err := m.Deny(agent, p.ID, "", ""); !errors.Is(err, ErrForbidden) {
		t.Errorf("a's sessions-only credential denies: %v", err)
	}
	if l := m.Approvals(person); len(l) != 1 {
		t.Errorf("a's approvals credential sees %d approvals", len(l))
	}
	if _, err := m.Get(person, s.ID); !errors.Is(err, ErrForbidden) {
		t.Errorf("a's approvals credential gets the session: %v", err)
	}
	if _, err := m.Create(ctx, person, &CreateRequest{}); !errors.Is(err, ErrForbidden) {
		t.Errorf("a's approvals credential creates a session: %v", err)
	}
	if l := m.List(person); len(l) != 0 {
		t.Errorf("a's approvals credential lists %d sessions", len(l))
	}
	if _, err := m.Get(agent, s.ID); err != nil {
		t.Errorf("a's sessions-only credential gets the session: %v", err)
	}
	// What was not shown cannot be approved.
	if _, err := m.Approve(a, p.ID, ApproveRequest{Scope: harness.ScopePrefix, Prefix: []string{"git"}, For: time.Minute}); err != nil {
		t.Errorf("a prefix of the command: %v", err)
	}
	if r := <-res; r.g == nil || r.g.Scope != harness.ScopePrefix || !slices.Equal(r.g.Argv, []string{"git"}) || r.g.By != "token:a" || r.err != nil {
		t.Errorf("answer: %+v", r)
	}
	res = ask(ctx, s, []string{"git", "push"})
	p = pending(t, m, a, 1)
	for _, req := range []ApproveRequest{
		{Scope: harness.ScopePrefix, Prefix: []string{"npm"}, For: time.Minute},
		{Scope: harness.ScopeSession},
		{Scope: harness.ScopeSession, For: 48 * time.Hour},
		{Scope: "forever"},
		{Name: strings.Repeat("x", 600)},
	} {
		if _, err := m.Approve(a, p.ID, req); err == nil {
			t.Errorf("approved with %+v", req)
		}
	}
	if _, err := m.Deny(a, p.ID, "alice", "not today"); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.g != nil || r.err == nil || r.err.Error() != "denied by alice (token:a): not today" {
		t.Errorf("denied: %+v", r)
	}
	if _, err := m.Approve(a, p.ID, ApproveRequest{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("answered twice: %v", err)
	}
	<-hooks

	// The request's end cancels it; the session's end too.
	cctx, cancel := context.WithCancel(ctx)
	res = ask(cctx, s, []string{"rm", "-rf", "/"})
	pending(t, m, a, 1)
	<-hooks
	cancel()
	if r := <-res; r.g != nil || r.err == nil {
		t.Errorf("cancelled: %+v", r)
	}
	res = ask(ctx, s, []string{"rm", "-rf", "/"})
	pending(t, m, a, 1)
	<-hooks
	if err := m.Delete(ctx, a, s.ID); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.g != nil || r.err == nil {
		t.Errorf("session ended: %+v", r)
	}
	if l := m.Approvals(a); len(l) != 0 {
		t.Errorf("left pending: %d", len(l))
	}

	var outcomes []string
	for _, r := range rec.approvals() {
		outcomes = append(outcomes, r.Outcome+" "+r.By+" "+r.Scope+" "+r.Why)
	}
	want := []string{"approved token:a prefix ", "denied alice (token:a)  not today", "cancelled   ", "cancelled   "}
	if !slices.Equal(outcomes, want) {
		t.Errorf("audit records:\n%q\nwant\n%q", outcomes, want)
	}
	if r := rec.approvals()[0]; r.Expires == nil || !slices.Equal(r.Prefix, []string{"git"}) || !slices.Equal(r.Command, []string{"git", "push", "origin"}) {
		t.Errorf("approved record: %+v", r)
	}
}

func TestApprovalTimeout(t *testing.T) {
	rec := &memAudit{}
	// A webhook nobody answers is logged, never in the way.
	m, err := New(Config{StateDir: t.TempDir(), Engine: newFake, Approvals: true, ApprovalTimeout: 200 * time.Millisecond,
		ApprovalWebhook: "http://127.0.0.1:1/hook", Audit: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	s, err := m.Create(context.Background(), TokenTenant("a"), &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r := <-ask(context.Background(), s, []string{"git", "push"})
	if r.g != nil || r.err == nil || !strings.Contains(r.err.Error(), "nobody answered") {
		t.Errorf("timed out: %+v", r)
	}
	if l := rec.approvals(); len(l) != 1 || l[0].Outcome != "timeout" {
		t.Errorf("audit: %+v", l)
	}

	// Without Approvals, a session has no approver: an ask refuses.
	m2, err := New(Config{StateDir: t.TempDir(), Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Shutdown(context.Background())
	s2, err := m2.Create(context.Background(), TokenTenant("a"), &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s2.approver() != nil {
		t.Error("a daemon without approvals has an approver")
	}
	if _, err := New(Config{StateDir: t.TempDir(), ApprovalWebhook: "file:///etc/passwd"}); err == nil {
		t.Error("a file: webhook was taken")
	}
}
