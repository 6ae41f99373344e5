package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// Pending approvals: when the rules of a session ask about an action (a
// command line, a program a script starts, a destination of the proxy)
// and the request brings no approver of its own, the action waits as an
// Approval until a person answers it through the daemon (Approve, Deny),
// or the timeout passes (Config.ApprovalTimeout, or the policy's
// harness.ask_timeout if shorter), which refuses it. An approval lets the
// action run under the session's policy, never more: the grant is the
// harness's (harness.NewGrant), bound to what was shown.
//
// How many may wait: Config.MaxPending per session, Config.TenantPending
// per tenant. Each pending approval holds a diff, a webhook request and a
// line on the person's page, and a command can start as many asked
// programs as its pids limit allows; an ask beyond a bound is refused at
// once (ErrTooManyPending), audited and logged, never queued and never
// let through.
//
// Who may answer: the session's tenant, and the daemon's own user (who
// can run any sandbox itself). An agent that holds its tenant's
// credential can therefore answer its own asks: a person who wants to be
// the only one to approve gives the agent a session of another tenant
// (docs/security.md).

// ErrApprovalRefused is returned (wrapped) when an answer cannot be
// given as asked: a scope that does not fit the action, a prefix wider
// than what was shown, an expiry out of bounds.
var ErrApprovalRefused = errors.New("approval refused")

// ErrTooManyPending is returned (wrapped) for an ask refused without
// asking anybody: its session or its tenant has as many approvals
// pending as Config.MaxPending or Config.TenantPending allow.
var ErrTooManyPending = errors.New("too many approvals pending")

// ApprovalTooMany is the audit outcome of an ask refused with
// ErrTooManyPending.
const ApprovalTooMany = "too many pending"

// AuditSink receives the daemon's audit records (audit.Decision,
// audit.Approval). *audit.Writer is one.
type AuditSink interface {
	Write(record any) error
}

// Approval is an action of a session that waits for a person. Its
// exported fields do not change.
type Approval struct {
	ID      string
	Session string
	Tenant  string
	// Argv and Dir are the command asked about (Dir: its working
	// directory inside the sandbox); for a network ask, Request is set
	// and Argv is empty.
	Argv    []string
	Dir     string
	Request *harness.Request
	// Rule names the rule that asks ("" when the command line hides what
	// it runs), Reason says why; Decided is the simple command of a shell
	// line that asked.
	Rule    string
	Reason  string
	Decided []string
	// Diff is an overlay or copy session's changes so far, as a unified
	// diff cut at maxDiff; "" in other modes.
	Diff    string
	Created time.Time
	Expires time.Time

	action   harness.Action
	decision harness.Decision
	done     chan struct{}
	once     sync.Once
	grant    *harness.Grant
	err      error
}

// What is the action as words: the command, or for a network ask the
// method ("CONNECT" for a tunnel) and host:port/path.
func (a *Approval) What() []string {
	if a.Request == nil {
		return a.Argv
	}
	m := a.Request.Method
	if m == "" {
		m = "CONNECT"
	}
	return []string{m, a.Request.Host + ":" + strconv.Itoa(a.Request.Port) + a.Request.Path}
}

// approvals are a Manager's pending approvals, and how many of them
// each session and each tenant holds (see reserve).
type approvals struct {
	mu       sync.Mutex
	pending  map[string]*Approval
	sessions counts
	tenants  counts
}

// reserve counts a new pending approval of s against its session's and
// its tenant's bounds, or refuses it when either is full. The count is
// taken before anything of the approval is made (its diff above all),
// so that a flood of refused asks costs next to nothing.
func (m *Manager) reserve(s *Session) error {
	m.ap.mu.Lock()
	defer m.ap.mu.Unlock()
	switch {
	case m.ap.sessions.full(s.ID, m.cfg.MaxPending):
		return fmt.Errorf("%w in this session (%d): refused without asking", ErrTooManyPending, m.cfg.MaxPending)
	case m.ap.tenants.full(s.Tenant.ID, m.cfg.TenantPending):
		return fmt.Errorf("%w for this tenant (%d): refused without asking", ErrTooManyPending, m.cfg.TenantPending)
	}
	m.ap.sessions.add(s.ID)
	m.ap.tenants.add(s.Tenant.ID)
	return nil
}

// release gives back what reserve counted.
func (m *Manager) release(s *Session) {
	m.ap.mu.Lock()
	defer m.ap.mu.Unlock()
	m.ap.sessions.sub(s.ID)
	m.ap.tenants.sub(s.Tenant.ID)
}

// approver is the Approver of a session's asks when the daemon keeps
// pending approvals, nil when it does not.
func (s *Session) approver() sandbox.Approver {
	if !s.m.cfg.Approvals {
		return nil
	}
	return queueApprover{s: s}
}

// Approver is the session's pending approvals as an Approver (what an
// exec request without one of its own gets), nil when the daemon keeps
// none (Config.Approvals): a transport that asks its own way falls back
// to it.
func (s *Session) Approver() sandbox.Approver { return s.approver() }

// queueApprover makes each ask a pending approval of its session and
// waits for the answer.
type queueApprover struct {
	s       *Session
	pending func(*Approval) // told of each pending approval made (ExecRequest.OnPending)
}

// Name is the approver's name in decision records: the answer came
// through the daemon's API (the approval record says who gave it).
func (queueApprover) Name() string { return "api" }

func (q queueApprover) Approve(ctx context.Context, a harness.Action, d harness.Decision) (bool, error) {
	g, err := q.ApproveScoped(ctx, a, d)
	return g != nil, err
}

func (q queueApprover) ApproveScoped(ctx context.Context, a harness.Action, d harness.Decision) (*harness.Grant, error) {
	pending := q.pending
	if pending == nil {
		// An ask of the session's own (a destination of its proxy),
		// which no one command is known to have made: every command
		// whose stream is open hears of it.
		pending = q.s.tellWatchers
	}
	return q.s.m.wait(ctx, q.s, a, d, pending)
}

// watch tells f of each ask of the session's own (see ApproveScoped)
// until the returned function is called: an exec's stream (its
// ExecRequest.OnPending) while it runs.
func (s *Session) watch(f func(*Approval)) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchers == nil {
		s.watchers = map[int]func(*Approval){}
	}
	s.nextWatcher++
	k := s.nextWatcher
	s.watchers[k] = f
	return func() {
		s.mu.Lock()
		delete(s.watchers, k)
		s.mu.Unlock()
	}
}

// tellWatchers tells every watcher of s of p.
func (s *Session) tellWatchers(p *Approval) {
	s.mu.Lock()
	fs := make([]func(*Approval), 0, len(s.watchers))
	for _, f := range s.watchers {
		fs = append(fs, f)
	}
	s.mu.Unlock()
	for _, f := range fs {
		f(p)
	}
}

// wait makes a pending approval of a, asked about with d in s, and waits
// for its answer, its timeout, ctx or the session's end; when s or its
// tenant has too many pending already, it refuses a at once. notify, if
// not nil, is told of the pending approval before the wait.
func (m *Manager) wait(ctx context.Context, s *Session, a harness.Action, d harness.Decision, notify func(*Approval)) (*harness.Grant, error) {
	now := time.Now()
	timeout := m.cfg.ApprovalTimeout
	if dl, ok := ctx.Deadline(); ok && dl.Sub(now) < timeout {
		timeout = dl.Sub(now)
	}
	p := &Approval{
		ID: newID(), Session: s.ID, Tenant: s.Tenant.ID,
		Argv: slices.Clone(a.Argv), Dir: a.Dir, Request: a.Request,
		Reason: d.Reason, Decided: slices.Clone(d.Command),
		Created: now, Expires: now.Add(timeout),
		action: a, decision: d, done: make(chan struct{}),
	}
	if d.Rule != nil {
		p.Rule = d.Rule.String()
	}
	if err := m.reserve(s); err != nil {
		m.auditApproval(p, ApprovalTooMany, "", "", nil)
		m.log.Warn("approval refused", "approval", p.ID, "session", s.ID, "tenant", s.Tenant.ID, "rule", p.Rule, "err", err)
		return nil, err
	}
	defer m.release(s)
	p.Diff = s.diffSoFar()
	m.ap.mu.Lock()
	if m.ap.pending == nil {
		m.ap.pending = map[string]*Approval{}
	}
	m.ap.pending[p.ID] = p
	m.ap.mu.Unlock()
	defer func() {
		m.ap.mu.Lock()
		delete(m.ap.pending, p.ID)
		m.ap.mu.Unlock()
	}()
	m.log.Info("approval pending", "approval", p.ID, "session", s.ID, "tenant", s.Tenant.ID, "rule", p.Rule)
	if m.cfg.ApprovalWebhook != "" {
		go m.notify(p)
	}
	if notify != nil {
		notify(p)
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var outcome string
	select {
	case <-p.done:
		if p.grant != nil {
			return p.grant, nil
		}
		return nil, p.err
	case <-timer.C:
		outcome = sandbox.ApprovalTimeout
	case <-ctx.Done():
		// The request's own deadline is what capped the timeout, and
		// it fires at the same moment as the timer: either way nobody
		// answered in time.
		outcome = sandbox.ApprovalCancelled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			outcome = sandbox.ApprovalTimeout
		}
	case <-s.ctx.Done():
		outcome = sandbox.ApprovalCancelled
	}
	// Nobody answered: an answer arriving now finds the approval gone.
	answered := true
	p.once.Do(func() { answered = false; close(p.done) })
	if answered {
		if p.grant != nil {
			return p.grant, nil
		}
		return nil, p.err
	}
	m.auditApproval(p, outcome, "", "", nil)
	m.log.Info("approval ended", "approval", p.ID, "session", s.ID, "outcome", outcome)
	if outcome == sandbox.ApprovalTimeout {
		return nil, noAnswer{timeout}
	}
	return nil, errors.New("the request or the session ended before anybody answered")
}

// maxDiff bounds the diff a pending approval shows: enough to judge
// by, and the rest is a moat diff away.
const maxDiff = 64 << 10

// diffSoFar is the unified diff of s's change set so far, cut at maxDiff;
// "" in direct and read-only mode, or when there is nothing to show.
func (s *Session) diffSoFar() string {
	id := s.ChangeSet()
	if id == "" {
		return ""
	}
	cs, err := workspace.Open(id)
	if err != nil {
		return ""
	}
	changes, err := cs.Changes()
	if err != nil || len(changes) == 0 {
		return ""
	}
	w := &cappedBuffer{max: maxDiff}
	cs.WriteDiff(w, changes, workspace.DiffOptions{Format: workspace.Unified})
	if w.cut {
		w.b.WriteString("\n[the diff goes on: moat diff " + id + " shows all of it]\n")
	}
	return w.b.String()
}

// cappedBuffer keeps the first max bytes written to it; a write past
// them fails, which ends the diff.
type cappedBuffer struct {
	b   strings.Builder
	max int
	cut bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); len(p) > room {
		c.b.Write(p[:max(room, 0)])
		c.cut = true
		return 0, errors.New("diff cut")
	}
	return c.b.Write(p)
}

// noAnswer is the error of an approval nobody answered in time; it is a
// context.DeadlineExceeded, which the sandbox records as a timeout.
type noAnswer struct{ after time.Duration }

func (e noAnswer) Error() string {
	return fmt.Sprintf("nobody answered within %s: refused (moat serve --approval-timeout)", e.after.Round(time.Millisecond))
}

func (noAnswer) Is(target error) bool { return target == context.DeadlineExceeded }

// mayAnswer says whether t may see and answer p.
func mayAnswer(t Tenant, p *Approval) bool {
	return t.MayApprovals() == nil && (p.Tenant == t.ID || t.self())
}

// Approvals returns the pending approvals t may answer, oldest first:
// those of its own sessions, and for the daemon's own user, all.
func (m *Manager) Approvals(t Tenant) []*Approval {
	m.ap.mu.Lock()
	defer m.ap.mu.Unlock()
	var out []*Approval
	for _, p := range m.ap.pending {
		if mayAnswer(t, p) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// GetApproval returns the pending approval id if t may answer it; one
// answered, timed out, or of another tenant is ErrNoApproval.
func (m *Manager) GetApproval(t Tenant, id string) (*Approval, error) {
	if err := t.MayApprovals(); err != nil {
		return nil, err
	}
	m.ap.mu.Lock()
	defer m.ap.mu.Unlock()
	p, ok := m.ap.pending[id]
	if !ok || !mayAnswer(t, p) {
		return nil, fmt.Errorf("%w %q: answered, timed out, or not one you may answer", ErrNoApproval, id)
	}
	return p, nil
}

// ApproveRequest is a person's approval of a pending action.
type ApproveRequest struct {
	// Scope is how far it reaches (harness.ScopeOnce when empty).
	Scope harness.Scope
	// Prefix, for harness.ScopePrefix, is the words the commands let
	// through begin with; empty means the whole command that asked.
	Prefix []string
	// For is how long a prefix or session approval lasts (required for
	// them, at most harness.MaxGrantTTL).
	For time.Duration
	// Name and Why are who the person says they are, and why; recorded.
	Name, Why string
}

// maxNote bounds a name or reason given with an answer.
const maxNote = 500

func by(t Tenant, name string) string {
	if name == "" {
		return t.ID
	}
	return name + " (" + t.ID + ")"
}

func checkNotes(name, why string) error {
	if len(name) > maxNote || len(why) > maxNote {
		return fmt.Errorf("%w: a name or reason is at most %d bytes", ErrBadRequest, maxNote)
	}
	// They reach the asker's terminal (moat exec), the audit stream and
	// the approvals page: a control sequence there is no note but an
	// act on whoever shows it (found by a tester).
	bad := workspace.MustEscape
	if strings.ContainsFunc(name, bad) || strings.ContainsFunc(why, bad) {
		return fmt.Errorf("%w: a name or reason holds a control character (an escape sequence, a line end, a bidirectional control): write it as plain text", ErrBadRequest)
	}
	return nil
}

// Approve answers the pending approval id for t: the action runs, under
// the session's policy, and so do the later ones req's scope covers until
// it expires.
func (m *Manager) Approve(t Tenant, id string, req ApproveRequest) (*Approval, error) {
	if err := checkNotes(req.Name, req.Why); err != nil {
		return nil, err
	}
	p, err := m.GetApproval(t, id)
	if err != nil {
		return nil, err
	}
	scope := req.Scope
	if scope == "" {
		scope = harness.ScopeOnce
	}
	if p.Request != nil && scope == harness.ScopePrefix {
		return nil, fmt.Errorf("%w: a network request is approved once or for the session, not by prefix", ErrApprovalRefused)
	}
	prefix := req.Prefix
	if scope == harness.ScopePrefix && len(prefix) == 0 {
		prefix = p.Decided
		if len(prefix) == 0 {
			prefix = p.Argv
		}
	}
	who := by(t, req.Name)
	g, err := harness.NewGrant(scope, p.action, p.decision, prefix, req.For, who, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrApprovalRefused, err)
	}
	if !m.answer(p, &g, nil, func() { m.auditApproval(p, sandbox.ApprovalApproved, who, req.Why, &g) }) {
		return nil, fmt.Errorf("%w %q: answered, timed out, or not one you may answer", ErrNoApproval, id)
	}
	m.log.Info("approval answered", "approval", p.ID, "session", p.Session, "outcome", "approved", "by", who, "scope", string(g.Scope))
	return p, nil
}

// Deny answers the pending approval id for t with a refusal: the action
// fails, naming the rule, who refused it and why.
func (m *Manager) Deny(t Tenant, id, name, why string) (*Approval, error) {
	if err := checkNotes(name, why); err != nil {
		return nil, err
	}
	p, err := m.GetApproval(t, id)
	if err != nil {
		return nil, err
	}
	who := by(t, name)
	msg := "denied by " + who
	if why != "" {
		msg += ": " + why
	}
	if !m.answer(p, nil, errors.New(msg), func() { m.auditApproval(p, sandbox.ApprovalDenied, who, why, nil) }) {
		return nil, fmt.Errorf("%w %q: answered, timed out, or not one you may answer", ErrNoApproval, id)
	}
	m.log.Info("approval answered", "approval", p.ID, "session", p.Session, "outcome", "denied", "by", who)
	return p, nil
}

// answer gives p its answer, unless it has one (or timed out) already;
// record (the answer's audit record) is written before the action that
// waits goes on, so that the stream has the approval before what it let
// through.
func (m *Manager) answer(p *Approval, g *harness.Grant, err error, record func()) bool {
	ok := false
	p.once.Do(func() {
		ok = true
		p.grant, p.err = g, err
		record()
		close(p.done)
	})
	return ok
}

func (m *Manager) auditApproval(p *Approval, outcome, who, why string, g *harness.Grant) {
	if m.cfg.Audit == nil {
		return
	}
	rec := audit.Approval{Type: audit.TypeApproval, Time: time.Now().UTC(), ID: p.ID, Session: p.Session, Tenant: p.Tenant,
		Command: p.What(), Dir: p.Dir, Rule: p.Rule, Reason: p.Reason, Outcome: outcome, By: who, Why: why, Created: p.Created.UTC()}
	if g != nil {
		rec.Scope = string(g.Scope)
		if g.Scope == harness.ScopePrefix {
			rec.Prefix = g.Argv
		}
		if !g.Expires.IsZero() {
			t := g.Expires.UTC()
			rec.Expires = &t
		}
	}
	m.auditWrite(rec)
}

// auditWrite writes a record to the daemon's audit stream; a failure is
// logged, and kept: the daemon keeps serving, but an action a rule
// decides is refused from then on (auditErr), since its record would be
// missing.
func (m *Manager) auditWrite(rec any) {
	if m.cfg.Audit == nil {
		return
	}
	if err := m.cfg.Audit.Write(rec); err != nil {
		if m.auditFailed.CompareAndSwap(nil, &err) {
			m.log.Error("audit stream: its records are lost from now on, and the actions the sessions' rules decide are refused until the daemon restarts", "err", err)
		} else {
			m.log.Error("audit stream", "err", err)
		}
	}
}

// auditErr is the audit stream's first failed write, or nil.
func (m *Manager) auditErr() error {
	if p := m.auditFailed.Load(); p != nil {
		return *p
	}
	return nil
}

// WebhookEvent is the JSON a webhook receives for each new pending
// approval: what waits and until when, nothing of the session's
// secrets or the daemon's credentials.
type WebhookEvent struct {
	Event    string    `json:"event"` // "approval.pending"
	ID       string    `json:"id"`
	Session  string    `json:"session"`
	Tenant   string    `json:"tenant"`
	Command  []string  `json:"command"`
	Dir      string    `json:"dir,omitempty"`
	Network  bool      `json:"network,omitempty"`
	Rule     string    `json:"rule,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	Approval string    `json:"approve_with"` // the command that answers it
}

// webhookTimeout bounds a webhook's request: a slow receiver must not
// hold up anything.
const webhookTimeout = 5 * time.Second

// notify posts p to the webhook; a failure is logged, never fatal.
func (m *Manager) notify(p *Approval) {
	ev := WebhookEvent{Event: "approval.pending", ID: p.ID, Session: p.Session, Tenant: p.Tenant,
		Command: p.What(), Dir: p.Dir, Network: p.Request != nil, Rule: p.Rule, Reason: p.Reason,
		Created: p.Created.UTC(), Expires: p.Expires.UTC(), Approval: "moat approve " + p.ID}
	body, _ := json.Marshal(ev)
	ctx, cancel := context.WithTimeout(context.Background(), webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.cfg.ApprovalWebhook, bytes.NewReader(body))
	if err != nil {
		m.log.Warn("approval webhook", "approval", p.ID, "err", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "moat")
	// No redirects: the webhook is where the operator said, nowhere else.
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		m.log.Warn("approval webhook", "approval", p.ID, "err", err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		m.log.Warn("approval webhook", "approval", p.ID, "status", resp.Status)
	}
}

// checkWebhook refuses a webhook URL that is not plain http(s).
func checkWebhook(u string) error {
	if u == "" {
		return nil
	}
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("approval webhook %q: want an http:// or https:// URL", u)
	}
	return nil
}
