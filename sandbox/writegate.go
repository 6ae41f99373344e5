package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
)

// Write operations a WriteGate decides, in audit records ("at": "write")
// and messages.
const (
	WriteFile   = "write"
	WriteMkdir  = "mkdir"
	WriteRemove = "remove"
)

// WriteGate decides the changes an API makes to a session's workspace
// (the daemon's files API, MCP's write_file and edit_file) by the
// policy's write rules (harness.Rules.DecideWrite): a deny refuses the
// change, an ask waits for an approval, an allow lets it go on. It is
// safe for concurrent use; the approvals a person gives it (for the
// session, for a prefix) hold for its later checks, and only for
// writes.
type WriteGate struct {
	pol       *policy.Policy
	rules     *harness.Rules
	approvals harness.Approvals
	runID     string
	record    func(audit.Decision) error
	ask       sync.Mutex // one question at a time to a person
	// Learn lets every change through, auditing what the rules would
	// have denied or asked with the outcome "learn" (SessionRequest.Learn).
	Learn bool
}

// NewWriteGate returns the gate of a session (runID names it in the audit
// stream) under p, a validated policy; record, when set, receives every
// decision other than a plain allow (an error, the record not written,
// refuses a change that would have gone through).
func NewWriteGate(p *policy.Policy, runID string, record func(audit.Decision) error) *WriteGate {
	return &WriteGate{pol: p, rules: harness.New(p), runID: runID, record: record}
}

// HasRules reports whether the policy has write rules: without any,
// every change is allowed.
func (g *WriteGate) HasRules() bool { return g.rules.HasWriteRules() }

// Check decides op (WriteFile, WriteMkdir, WriteRemove) of rel, a path
// relative to the workspace. An ask is let through by an approval given
// before, else asks ap for at most the policy's ask_timeout (ctx bounds
// the wait), else is refused. It returns the decision and, when the
// change must not happen, an error wrapping ErrDenied that names the rule
// and how to get the change through.
func (g *WriteGate) Check(ctx context.Context, op, rel string, ap Approver) (_ harness.Decision, err error) {
	d := g.rules.DecideWrite(rel)
	if d.Verdict == harness.Allow && d.Rule == nil {
		return d, nil
	}
	rec := g.newRecord(op, rel, d)
	defer func() {
		if werr := g.audit(&rec); werr != nil && err == nil {
			err = fmt.Errorf("%w: the %s of %s was %s; %s", ErrDenied, op, rel, outcomeWord(rec.Outcome), Unrecorded(werr))
		}
	}()
	if g.Learn && d.Verdict != harness.Allow {
		rec.Outcome = OutcomeLearn
		return d, nil
	}
	switch d.Verdict {
	case harness.Allow:
		return d, nil
	case harness.Deny:
		return d, fmt.Errorf("%w: rule %s denies a %s of %s%s (change the policy's [[rules]] to allow it)", ErrDenied, d.Rule, op, rel, because(d))
	}
	argv := []string{op, rel}
	if gr, ok := g.approvals.Use(argv, "", d); ok {
		rec.Outcome, rec.Approver, rec.Scope, rec.Expires = ApprovalApproved, gr.By, string(gr.Scope), expiry(gr)
		return d, nil
	}
	if ap == nil {
		rec.Outcome = ApprovalNoApprover
		return d, fmt.Errorf("%w: rule %s asks before a %s of %s%s; nobody can be asked here: approve it where the session's asks are answered, or add a [[rules]] entry with decision = \"allow\" for it", ErrDenied, d.Rule, op, rel, because(d))
	}
	g.ask.Lock()
	defer g.ask.Unlock()
	if gr, ok := g.approvals.Use(argv, "", d); ok {
		rec.Outcome, rec.Approver, rec.Scope, rec.Expires = ApprovalApproved, gr.By, string(gr.Scope), expiry(gr)
		return d, nil
	}
	req := &Request{Policy: g.pol, Approver: ap}
	gr, err := askPerson(ctx, req, harness.Action{Argv: argv, Write: rel}, d, &rec, nil)
	if gr == nil {
		return d, fmt.Errorf("%w: the %s of %s was not approved (%v); rule %s asked%s", ErrDenied, op, rel, err, d.Rule, because(d))
	}
	if gr.Scope != harness.ScopeOnce {
		g.approvals.Add(*gr)
	}
	return d, nil
}

// Follow decides real, the path a change Check let through at rel
// resolves to through the workspace's links, without asking: a rule that
// did not decide rel refuses it (a link must not carry a change past a
// rule), as does a deny.
func (g *WriteGate) Follow(op, rel, real string, checked harness.Decision) error {
	if real == rel || g.Learn {
		return nil
	}
	d := g.rules.DecideWrite(real)
	if d.Verdict == harness.Allow || d.Verdict == checked.Verdict && d.Rule != nil && checked.Rule != nil && *d.Rule == *checked.Rule {
		return nil
	}
	rec := g.newRecord(op, real, d)
	rec.Outcome = ApprovalDenied
	g.audit(&rec)
	return fmt.Errorf("%w: %s leads to %s through a link, and rule %s %s it%s (change %s by its own path)", ErrDenied, rel, real, d.Rule, d.Verdict.Verb(), because(d), real)
}

func (g *WriteGate) newRecord(op, rel string, d harness.Decision) audit.Decision {
	rec := audit.Decision{Type: audit.TypeDecision, Time: time.Now().UTC(), RunID: g.runID, At: "write",
		Command: []string{op, rel}, Verdict: string(d.Verdict), Reason: d.Reason}
	if d.Rule != nil {
		rec.Rule = d.Rule.String()
	}
	return rec
}

func (g *WriteGate) audit(rec *audit.Decision) error {
	if g.record == nil {
		return nil
	}
	return g.record(*rec)
}
