package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/harness"
)

// Approver answers the harness's asks: a person, through whatever the
// caller has (a terminal, later an API queue).
type Approver interface {
	// Name says who answers, for the audit stream ("tty").
	Name() string
	// Approve shows a person the action and the decision that asks about
	// it, and returns whether it may run, this once. An error counts as a
	// refusal. Approve may block until the person answers or ctx ends.
	Approve(ctx context.Context, a harness.Action, d harness.Decision) (bool, error)
}

// ErrDenied is returned (wrapped) when the harness refuses a command
// line: a deny rule, or an ask nobody approved. Nothing ran.
var ErrDenied = errors.New("refused by the harness")

// Approval outcomes of an ask, in Report.Approval and the audit stream.
const (
	ApprovalApproved   = "approved"
	ApprovalDenied     = "denied"
	ApprovalNoApprover = "no approver"
)

// decide checks the command line against the policy's rules before
// anything of the run exists, asks req.Approver about an ask, and audits
// the decision. It returns ErrDenied (wrapped, with the rule and how to
// get the command through) when the command must not run.
func decide(ctx context.Context, req *Request, rep *Report, dir string, rules *harness.Rules, ap *harness.Approvals) error {
	a := harness.Action{Argv: req.Args, Dir: dir}
	d := rules.Decide(a)
	if d.Verdict == harness.Allow && d.Rule == nil {
		return nil // no rule had anything to say: nothing to record
	}
	rep.Decision = &d
	rec := audit.Decision{Type: audit.TypeDecision, Time: time.Now().UTC(), RunID: rep.RunID,
		Command: req.Args, Dir: dir, Verdict: string(d.Verdict), Reason: d.Reason, Decided: d.Command}
	if d.Rule != nil {
		rec.Rule = d.Rule.String()
	}
	defer func() {
		if req.AuditDecision != nil {
			req.AuditDecision(rec)
		}
	}()
	what := "rule " + rec.Rule
	if d.Rule == nil {
		what = "the command line"
	}
	switch d.Verdict {
	case harness.Deny:
		return fmt.Errorf("%w: %s denies %s: %s (change the policy's [[rules]] to allow it)", ErrDenied, what, shellQuote(d.Command), d.Reason)
	case harness.Ask:
		if req.Approver == nil {
			rep.Approval, rec.Outcome = ApprovalNoApprover, ApprovalNoApprover
			return fmt.Errorf("%w: %s asks before %s: %s; nobody can be asked here: run moat in a terminal to approve it, or add a [[rules]] entry with decision = \"allow\" for it (moat policy explain shows which rule decides)", ErrDenied, what, shellQuote(d.Command), d.Reason)
		}
		rec.Approver = req.Approver.Name()
		ok, err := req.Approver.Approve(ctx, a, d)
		if err != nil || !ok {
			rep.Approval, rec.Outcome = ApprovalDenied, ApprovalDenied
			why := ""
			if err != nil {
				why = fmt.Sprintf(" (%v)", err)
			}
			return fmt.Errorf("%w: %s was not approved%s; %s asked: %s", ErrDenied, shellQuote(d.Command), why, what, d.Reason)
		}
		rep.Approval, rec.Outcome, rec.Scope = ApprovalApproved, ApprovalApproved, string(harness.ScopeOnce)
		grantLine(ap, rules, a, rec.Approver)
	}
	return nil
}

// shellQuote renders argv for a message, quoting words a shell would split.
func shellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, w := range argv {
		if w == "" || strings.ContainsAny(w, " \t\n'\"\\$`;&|<>()*?[]{}~#!") {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		out[i] = w
	}
	return strings.Join(out, " ")
}
