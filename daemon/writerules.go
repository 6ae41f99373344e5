package daemon

import (
	"context"
	"errors"
	"strings"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// The policy's write rules ([[rules]] with match.write) decide every
// change the files API makes, for every caller (the HTTP API, MCP's
// write_file and edit_file): each change is checked here, before it is
// made, by the session's sandbox.WriteGate, on the path asked for and
// on the path it resolves to. A refusal wraps sandbox.ErrDenied and
// names the rule; an ask goes to the request's approver (WithApprover),
// else to the daemon's pending approvals (Config.Approvals), else is
// refused.

type approverKey struct{}

// WithApprover returns ctx carrying ap, which answers the asks of the
// write rules about the files API's changes made with it.
func WithApprover(ctx context.Context, ap sandbox.Approver) context.Context {
	return context.WithValue(ctx, approverKey{}, ap)
}

func approverOf(ctx context.Context) sandbox.Approver {
	ap, _ := ctx.Value(approverKey{}).(sandbox.Approver)
	return ap
}

// newWriteGate makes the session's gate under p, whose decisions go to
// the daemon's log, its audit stream (Config.Audit) and the session's
// events.
func (s *Session) newWriteGate(p *policy.Policy) *sandbox.WriteGate {
	return sandbox.NewWriteGate(p, s.ID, func(d audit.Decision) error {
		s.m.log.Info("write rule", "session", s.ID, "change", strings.Join(d.Command, " "), "verdict", d.Verdict, "rule", d.Rule, "outcome", d.Outcome, "approver", d.Approver)
		s.audit(d)
		return s.m.auditErr()
	})
}

// CheckWrite decides op (sandbox.WriteFile, WriteMkdir, WriteRemove) of
// rel by the write rules, for a change made by other means than this
// package's files API (MCP's helper that writes an overlay session's
// files inside its sandbox): that change must then not follow a link
// within the workspace, which would carry it past a rule about the
// path it leads to (see HasWriteRules).
func (s *Session) CheckWrite(ctx context.Context, op, rel string) error {
	rel, err := cleanRel(rel)
	if err != nil {
		return err
	}
	_, err = s.checkWrite(ctx, op, rel)
	return err
}

// HasWriteRules reports whether the session's policy has write rules
// (true, failing closed, for a session made without its gate).
func (s *Session) HasWriteRules() bool { return s.gate == nil || s.gate.HasRules() }

// errNoGate refuses a change of a session made without its gate: every
// way the Manager makes a session sets one, and a change nobody can
// decide is not made.
var errNoGate = errors.New("the session's write rules were not set up: the change is refused")

// checkWrite decides op of rel, as asked for, before anything is done.
func (s *Session) checkWrite(ctx context.Context, op, rel string) (harness.Decision, error) {
	if s.gate == nil {
		return harness.Decision{}, errNoGate
	}
	ap := approverOf(ctx)
	if ap == nil {
		// As for a command: the daemon's pending approvals, if it keeps
		// them.
		ap = s.approver()
	}
	return s.gate.Check(ctx, op, rel, ap)
}

// followWrite decides op of real, the path rel resolved to.
func (s *Session) followWrite(op, rel, real string, d harness.Decision) error {
	if s.gate == nil {
		return errNoGate
	}
	return s.gate.Follow(op, rel, real, d)
}
