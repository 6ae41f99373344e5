package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/workspace"
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

// ScopedApprover is an Approver that can approve more than the action it
// shows: once, a command prefix, or everything the asking rule asks about
// for the rest of the run, each until an expiry (see harness.NewGrant,
// which checks what a person chose against what was shown).
type ScopedApprover interface {
	Approver
	// ApproveScoped is Approve returning the grant the person gave; nil
	// refuses.
	ApproveScoped(ctx context.Context, a harness.Action, d harness.Decision) (*harness.Grant, error)
}

// ErrDenied is returned (wrapped) when the harness refuses a command
// line: a deny rule, or an ask nobody approved. Nothing ran.
var ErrDenied = errors.New("refused by the harness")

// ErrNoApprover is returned (wrapped) by an Approver that refuses an ask
// without putting it to anyone (a terminal that is the command's): the
// outcome is ApprovalNoApprover, not a person's denial.
var ErrNoApprover = errors.New("nobody can be asked")

// Approval outcomes of an ask, in Report.Approval and the audit stream.
const (
	ApprovalApproved   = "approved"
	ApprovalDenied     = "denied"
	ApprovalNoApprover = "no approver"
	ApprovalTimeout    = "timeout"
	// ApprovalCancelled: the ask ended unanswered because its run or
	// request did (a limit, a signal, a client gone).
	ApprovalCancelled = "cancelled"
	// OutcomeLearn: a deny or an ask let through by Request.Learn.
	OutcomeLearn = "learn"
)

// outcomeWord says how an action a rule decided was let through, for a
// refusal's message.
func outcomeWord(outcome string) string {
	switch outcome {
	case ApprovalApproved:
		return "approved"
	case OutcomeLearn:
		return "let through by --learn"
	}
	return "allowed by the rules"
}

// defaultReason says d's reason is the one a rule without a reason of
// its own gets ("rule NAME (FILE:LINE)"), which says nothing its name
// does not: a message naming the rule leaves it out.
func defaultReason(d harness.Decision) bool {
	return d.Rule != nil && d.Reason == "rule "+d.Rule.String()
}

// because is ": REASON" after a message naming d's rule, "" when the
// reason only names the rule again.
func because(d harness.Decision) string {
	if defaultReason(d) {
		return ""
	}
	return ": " + d.Reason
}

// Because is ": REASON" for a message that names d's rule already, ""
// when the reason is the rule's name again (a rule without a reason of
// its own), so that a message names it once.
func Because(d harness.Decision) string { return because(d) }

// askPerson asks req.Approver about a, which the rules asked about with
// d, for at most the policy's ask_timeout, and fills in rec (who, scope,
// expiry, outcome). It returns the grant, or nil and why not.
func askPerson(ctx context.Context, req *Request, a harness.Action, d harness.Decision, rec *audit.Decision, clock *harness.Clock) (*harness.Grant, error) {
	rec.Approver = req.Approver.Name()
	if clock != nil {
		// A person's time is not the command's: it does not count
		// against the wall budget.
		clock.Pause()
		defer clock.Resume()
	}
	ctx, cancel := context.WithTimeout(ctx, req.Policy.Harness.AskWait())
	defer cancel()
	var g *harness.Grant
	var err error
	if sa, ok := req.Approver.(ScopedApprover); ok {
		g, err = sa.ApproveScoped(ctx, a, d)
	} else {
		var yes bool
		if yes, err = req.Approver.Approve(ctx, a, d); yes && err == nil {
			once, _ := harness.NewGrant(harness.ScopeOnce, a, d, nil, 0, rec.Approver, time.Now())
			g = &once
		}
	}
	rec.Time = time.Now().UTC()
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		rec.Outcome = ApprovalTimeout
		return nil, fmt.Errorf("nobody answered within %s (harness.ask_timeout)", req.Policy.Harness.AskWait())
	case errors.Is(err, context.DeadlineExceeded):
		// The approver's own bound (a daemon's) passed first.
		rec.Outcome = ApprovalTimeout
		return nil, err
	case errors.Is(err, ErrNoApprover):
		rec.Outcome = ApprovalNoApprover
		return nil, err
	case ctx.Err() != nil, errors.Is(err, context.Canceled):
		rec.Outcome = ApprovalCancelled
		why := err
		if c := context.Cause(ctx); ctx.Err() != nil && c != nil && !errors.Is(c, context.Canceled) {
			why = c // a limit's cause: the wall clock, a budget
		}
		if why == nil || why == context.Canceled {
			return nil, errors.New("the ask ended unanswered: the run was stopped")
		}
		return nil, fmt.Errorf("the ask ended unanswered: %w", why)
	case err != nil:
		rec.Outcome = ApprovalDenied
		return nil, err
	case g == nil:
		rec.Outcome = ApprovalDenied
		return nil, errors.New("refused")
	}
	rec.Outcome, rec.Scope = ApprovalApproved, string(g.Scope)
	if !g.Expires.IsZero() {
		t := g.Expires.UTC()
		rec.Expires = &t
	}
	return g, nil
}

// decide checks the command line against the policy's rules before
// anything of the run exists, asks req.Approver about an ask, and audits
// the decision. It returns ErrDenied (wrapped, with the rule and how to
// get the command through) when the command must not run. The once grants
// for the line's commands go to line, a wider grant to shared (the same
// in a run; a session's, across its commands, in a session).
//
// DecideLine is the decision moat run makes about the command line argv
// of policy p before the run, in the directory dir with the caller's
// environment environ: its words, and the file its program is (a link to
// a denied program, a multi-call binary's shell, a script's interpreter),
// the stronger winning. What the line starts as it runs is decided then.
// moat policy explain says it, so that it agrees with the run.
func DecideLine(p *policy.Policy, argv []string, dir string, environ []string) harness.Decision {
	rules := harness.New(p)
	env := buildEnv(p.Env, environ)
	rules = lineRules(rules, p, argv, dir, env)
	prog, _, _ := lineProgram(rules, argv, dir, env)
	return stronger(stronger(rules.Decide(harness.Action{Argv: argv, Dir: dir}), prog), rules.DecideExecFrom(argv, dir))
}

// prog is what the line's own program is decided as by its file
// (lineProgram), where the caller decided it; the stronger decision wins.
func decide(ctx context.Context, req *Request, rep *Report, dir string, rules *harness.Rules, line, shared *harness.Approvals, prog harness.Decision) (err error) {
	a := harness.Action{Argv: req.Args, Dir: dir}
	// The program's relative arguments are read from its working
	// directory too (cat ../../etc/x from the workspace is cat /etc/x).
	d := stronger(stronger(rules.Decide(a), prog), rules.DecideExecFrom(req.Args, dir))
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
		if req.AuditDecision == nil {
			return
		}
		if werr := req.AuditDecision(rec); werr != nil && err == nil {
			err = fmt.Errorf("%w: %s was %s; %s", ErrDenied, shellQuote(d.Command), outcomeWord(rec.Outcome), Unrecorded(werr))
		}
	}()
	what := "rule " + rec.Rule
	if d.Rule == nil {
		what = "the command line"
	}
	if req.Learn && d.Verdict != harness.Allow {
		rec.Outcome = OutcomeLearn
		return nil
	}
	switch d.Verdict {
	case harness.Deny:
		return fmt.Errorf("%w: %s denies %s%s (change the policy's [[rules]] to allow it)", ErrDenied, what, shellQuote(d.Command), because(d))
	case harness.Ask:
		// A session's earlier approval for a while (a prefix, the rule)
		// covers the line without asking again.
		if g, ok := shared.UseScoped(a.Argv, dir, d); ok && coversAsks(shared, rules, a) {
			rep.Approval = ApprovalApproved
			rec.Outcome, rec.Approver, rec.Scope, rec.Expires = ApprovalApproved, g.By, string(g.Scope), expiry(g)
			grantLine(line, rules, a, g.By)
			return nil
		}
		// The question names a command the grants leave asking: the
		// line's first ask may be one an earlier approval covers, while
		// another of its commands is what still needs a person.
		if u, ok := firstUncovered(shared, rules, a, d); ok {
			d = u
			rep.Decision = &d
			rec.Reason, rec.Decided, rec.Rule = d.Reason, d.Command, d.Rule.String()
			what = "rule " + rec.Rule
		}
		if req.Approver == nil {
			rep.Approval, rec.Outcome = ApprovalNoApprover, ApprovalNoApprover
			return fmt.Errorf("%w: %s asks before %s%s; nobody can be asked here: run moat in a terminal to approve it, or add a [[rules]] entry with decision = \"allow\" for it (moat policy explain shows which rule decides)", ErrDenied, what, shellQuote(d.Command), because(d))
		}
		g, err := askPerson(ctx, req, a, d, &rec, nil)
		rep.Approval = rec.Outcome
		if g == nil {
			return fmt.Errorf("%w: %s was not approved (%v); %s asked%s", ErrDenied, shellQuote(d.Command), err, what, because(d))
		}
		// The person saw the whole line: its commands start unasked, once
		// each; a wider grant covers what it covers for the rest of the run.
		grantLine(line, rules, a, rec.Approver)
		if g.Scope != harness.ScopeOnce {
			shared.Add(*g)
		}
	}
	return nil
}

// coversAsks reports whether the lasting grants of shared cover each
// command of a's line that the rules ask about, each as its own rule
// decides it: a grant for the line's program (find, xargs) does not
// approve another command the line runs through it (find -exec).
func coversAsks(shared *harness.Approvals, rules *harness.Rules, a harness.Action) bool {
	for _, argv := range rules.Asks(a) {
		if _, ok := shared.UseScoped(argv, a.Dir, rules.DecideExec("", argv)); !ok {
			return false
		}
	}
	return true
}

// firstUncovered returns, when the lasting grants of shared cover d (the
// line's decision) but not every command of a's line the rules ask
// about, the decision of the first such command they leave asking.
func firstUncovered(shared *harness.Approvals, rules *harness.Rules, a harness.Action, d harness.Decision) (harness.Decision, bool) {
	if _, ok := shared.UseScoped(d.Command, a.Dir, d); !ok {
		return harness.Decision{}, false
	}
	for _, argv := range rules.Asks(a) {
		di := rules.DecideExec("", argv)
		if _, ok := shared.UseScoped(argv, a.Dir, di); !ok && di.Verdict == harness.Ask && di.Rule != nil {
			if di.Command == nil {
				di.Command = argv
			}
			return di, true
		}
	}
	return harness.Decision{}, false
}

// shellQuote renders argv for a message, quoting words a shell would split.
// A command line of megabytes is cut as an audit record keeps it
// (audit.BoundArgv): the message goes to stderr, the report and the run
// record.
func shellQuote(argv []string) string {
	argv, _, _ = audit.BoundArgv(argv)
	out := make([]string, len(argv))
	for i, w := range argv {
		switch {
		case strings.IndexFunc(w, workspace.MustEscape) >= 0:
			// A word a terminal would act on (an escape sequence, a
			// direction override) is written as bash's $'...' writes it.
			w = ansiC(w)
		case w == "" || strings.ContainsAny(w, " \t\n'\"\\$`;&|<>()*?[]{}~#!") || strings.IndexFunc(w, unicode.IsSpace) >= 0:
			// A space of another script (U+3000, U+00A0) made one word
			// read as several (found by a tester).
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		out[i] = w
	}
	return strings.Join(out, " ")
}

// ansiC is w quoted as bash's $'...', each character a terminal would act
// on as its escape: one that bash reads back as the same bytes, a byte
// that is no part of a character as \xHH, a character (a C1 control
// among them) as \uHHHH, which bash writes in UTF-8 (\x9d, for U+009D,
// was the one byte 0x9D pasted back: another word; found by a tester).
func ansiC(w string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(w); {
		r, size := utf8.DecodeRuneInString(w[i:])
		raw := w[i]
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, raw)
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case workspace.MustEscape(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case workspace.MustEscape(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case workspace.MustEscape(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}
