// Package harness decides what an agent should do, before the sandbox
// bounds what it can do: it checks an action against the policy's
// [[rules]] and the built-in rule sets, and says allow, deny or ask.
//
// An action is a command line, checked before a run starts. A shell
// line (sh -c '…', bash -lc '…', and the wrappers env, sudo, nice, timeout,
// xargs and the like) is parsed with a real shell parser and every simple
// command in it is checked: pipelines, lists, subshells, brace groups,
// functions' bodies and the commands inside $(…). A line the parser
// cannot read, or one that hides what it runs (eval, a program name that
// is computed, a shell given a computed script or reading one from a
// pipe), counts as ask. A script file, run or sourced (`bash deploy.sh`,
// `source .venv/bin/activate`), is a program like any other: what it
// runs is not seen here.
//
// How a decision is made: for each simple command, the policy's own rules
// come first; if any match, the strongest of them decides that command
// (deny beats ask beats allow; the first rule of that strength names the
// reason), and the built-in sets are not consulted for it, so a policy can
// allow what a built-in set asks about. Otherwise the built-in sets decide,
// the same way. A command no rule matches is allowed: the rules are a
// check of intent, and the sandbox stays the wall. Across the simple
// commands of a line, the strongest decision wins, the first command of
// that strength naming it.
//
// A program a script or make starts later is checked at its execve
// (DecideExec, which the sandbox package calls for each exec): by its own
// argv, without parsing, so every program is checked once. A destination
// of the egress proxy is checked against the host rules (DecideHost).
// Approvals records what a person let run, with a scope and an expiry;
// Spend counts a run's or a session's [budgets].
//
// It makes no system call and prints nothing; it imports policy (and the
// host grammar of internal/netrule), never
// sandbox or a backend, so every caller (the CLI, later the daemon) gets
// the same decisions.
package harness

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/moatbox/moat/internal/netrule"
	"github.com/moatbox/moat/policy"
)

// Verdict is what happens to an action.
type Verdict string

// The verdicts, weakest first.
const (
	Allow Verdict = policy.DecisionAllow
	Ask   Verdict = policy.DecisionAsk
	Deny  Verdict = policy.DecisionDeny
)

// Verb says what a rule of this verdict does to an action: "allows",
// "asks before", "denies".
func (v Verdict) Verb() string {
	switch v {
	case Deny:
		return "denies"
	case Ask:
		return "asks before"
	}
	return "allows"
}

func (v Verdict) rank() int {
	switch v {
	case Deny:
		return 2
	case Ask:
		return 1
	}
	return 0
}

// Action is what is about to happen: today, a command about to run.
type Action struct {
	// Argv is the command line as given to moat run (not through a shell).
	Argv []string
	// Dir is the working directory it runs in; shown to a person asked,
	// not matched by rules.
	Dir string
	// Request, when set, is a network request asked about (DecideHost);
	// Argv is then empty.
	Request *Request
	// Write, when set, is the workspace path an API change asked about
	// (DecideWrite); Argv is then the change and the path ("write",
	// "deploy/app.yaml"), for an approver that shows a command.
	Write string
}

// RuleRef names the rule that made a decision.
type RuleRef struct {
	// Set is "policy" for a rule of the policy, or the name of a built-in
	// set ("irreversible").
	Set string `json:"set"`
	// Name is the rule's name ("rules[N]" when the policy gives none).
	Name string `json:"name"`
	// File and Line locate a policy's rule; empty for built-in rules.
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
}

// String is "NAME (FILE:LINE)" for a policy's rule, "SET/NAME" for a
// built-in one.
func (r *RuleRef) String() string {
	if r.Set != SetPolicy {
		return r.Set + "/" + r.Name
	}
	if r.File != "" && r.Line > 0 {
		return fmt.Sprintf("%s (%s:%d)", r.Name, r.File, r.Line)
	}
	return r.Name
}

// SetPolicy is the RuleRef.Set of a policy's own rules.
const SetPolicy = "policy"

// Decision is the outcome of Decide.
type Decision struct {
	Verdict Verdict `json:"verdict"`
	// Rule is the rule that decided; nil when none matched (allow) or when
	// the line hides what it runs (ask, Reason says why).
	Rule *RuleRef `json:"rule,omitempty"`
	// Reason is the rule's reason, or why a line counts as ask.
	Reason string `json:"reason,omitempty"`
	// Command is the simple command that decided, as it was read (for a
	// shell line, one command of it); nil when nothing matched.
	Command []string `json:"command,omitempty"`
}

// Rules are the compiled rules of one policy. Build them with New.
type Rules struct {
	policy  []*rule
	builtin []*rule
	hosts   []*hostRule
	writes  []*rule // the policy's write rules (DecideWrite)
	scratch scratch // where the built-in delete-outside does not ask
}

type rule struct {
	ref  RuleRef
	r    policy.Rule
	kind Verdict
	// programs, when set, are the only programs (base names) the rule can
	// match: the built-in rules say so, which spares compiling their
	// regular expressions in a run of anything else.
	programs []string
	// needs, when set, are words of which one must be among the
	// arguments for the rule to match; the same saving. A need that ends
	// in "=" is an option given its value in the same word
	// (--config-env=): it is met by a word that begins with it.
	needs []string
	// confined marks the built-in rule about deletions outside the
	// workspace: it does not match a command whose every operand stays
	// within Rules.scratch.
	confined bool
	once     sync.Once
	re       *regexp.Regexp
}

func (r *rule) match(argv []string) bool {
	if len(argv) == 0 || r.programs != nil && !slices.Contains(r.programs, path.Base(argv[0])) {
		return false
	}
	if r.needs != nil && !slices.ContainsFunc(argv[1:], r.needed) {
		return false
	}
	// A deny or an ask holds however the line spells its paths; an allow
	// takes them as written (policy.Match.MatchCommandSpellings).
	loose := r.r.Decision != policy.DecisionAllow
	if r.r.Match.CommandRegex == "" {
		if loose {
			return r.r.Match.MatchCommandSpellings(argv)
		}
		return r.r.Match.MatchCommand(argv)
	}
	r.once.Do(func() { r.re, _ = regexp.Compile(r.r.Match.CommandRegex) })
	if r.re == nil {
		return false
	}
	if r.re.MatchString(policy.CommandWords(argv)) {
		return true
	}
	if !loose {
		return false
	}
	for _, sp := range policy.Spellings(argv) {
		if r.re.MatchString(policy.CommandWords(sp)) {
			return true
		}
	}
	return false
}

// needed reports whether the word w is one of r's needs.
func (r *rule) needed(w string) bool {
	for _, n := range r.needs {
		if w == n || strings.HasSuffix(n, "=") && strings.HasPrefix(w, n) {
			return true
		}
	}
	return false
}

// New compiles the command, host and write rules of p, which must be
// valid (see policy.Policy.Validate), and the built-in sets it names.
func New(p *policy.Policy) *Rules {
	rs := &Rules{}
	for i, r := range p.Rules {
		if r.Match.Host != "" {
			// Validate checked the grammar.
			h, _ := netrule.ParseHost(r.Match.Host, false)
			rs.hosts = append(rs.hosts, &hostRule{
				ref: RuleRef{Set: SetPolicy, Name: p.RuleName(i), File: p.Source, Line: p.RuleLine(i)},
				r:   r, kind: Verdict(r.Decision), host: h,
				folded: policy.Match{Path: strings.ToLower(r.Match.Path)},
			})
		}
		if r.Match.Write != "" {
			rs.writes = append(rs.writes, &rule{
				ref: RuleRef{Set: SetPolicy, Name: p.RuleName(i), File: p.Source, Line: p.RuleLine(i)},
				r:   r, kind: Verdict(r.Decision),
			})
		}
		if !r.Match.IsCommand() {
			continue
		}
		rs.policy = append(rs.policy, &rule{
			ref: RuleRef{Set: SetPolicy, Name: p.RuleName(i), File: p.Source, Line: p.RuleLine(i)},
			r:   r, kind: Verdict(r.Decision),
		})
	}
	for _, set := range p.Harness.Builtin {
		rs.builtin = append(rs.builtin, builtinSet(set)...)
	}
	rs.scratch = newScratch(p)
	return rs
}

// InSandbox returns rules that also know the sandbox's mounts: own are
// its own trees, which go with it (its /tmp, home, /dev/shm), binds the
// host paths bound writable into it outside the workspace (read_write
// paths, a git directory outside the workspace). The built-in
// delete-outside rule then does not ask about what is in own and neither
// in nor above a bind or the workspace (found by a tester: a script's
// rm -rf "$(mktemp -d)" was refused). rs is not changed.
func (rs *Rules) InSandbox(own, binds []string) *Rules {
	c := *rs
	if c.scratch.ws == "" {
		return &c // nothing known of the workspace: no scratch at all
	}
	c.scratch.kept = slices.Clone(rs.scratch.kept)
	for _, b := range binds {
		if !path.IsAbs(b) {
			return rs
		}
		// One in the workspace is the workspace's, as before.
		if b = path.Clean(b); !under(b, c.scratch.ws) {
			c.scratch.kept = append(c.scratch.kept, b)
		}
	}
	c.scratch.own = nil
	for _, d := range own {
		if d = path.Clean(d); path.IsAbs(d) && d != "/" {
			c.scratch.own = append(c.scratch.own, d)
		}
	}
	return &c
}

// Decide checks a and returns the decision.
func (rs *Rules) Decide(a Action) Decision {
	best := Decision{Verdict: Allow}
	for _, c := range split(a.Argv) {
		d := rs.decideOne(c)
		if d.Verdict.rank() > best.Verdict.rank() || d.Verdict == best.Verdict && best.Command == nil && d.Command != nil {
			best = d
		}
	}
	return best
}

func (rs *Rules) decideOne(c simple) Decision {
	d := rs.decideWords(c)
	// git runs its subcommand `git push` as the program git-push (in
	// git's exec-path, /usr/lib/git-core): a program named git-SUB is
	// decided as `git SUB` too, and the stronger decision wins.
	if len(c.argv) == 0 || c.hidden != "" {
		return d
	}
	if name := baseName(c.argv[0]); len(name) > len("git-") && strings.HasPrefix(name, "git-") {
		alt := append([]string{"git", name[len("git-"):]}, c.argv[1:]...)
		if da := rs.decideWords(simple{argv: alt}); da.Verdict.rank() > d.Verdict.rank() {
			return da
		}
	}
	return d
}

// decideWords decides one simple command by its words as they are.
func (rs *Rules) decideWords(c simple) Decision {
	pd, pok := strongest(rs.policy, c.argv, nil)
	if c.hidden != "" {
		// Nothing allows a line whose program cannot be seen.
		if pok && pd.Verdict != Allow {
			return pd
		}
		return Decision{Verdict: Ask, Reason: c.hidden, Command: c.argv}
	}
	if pok {
		return pd
	}
	if bd, ok := strongest(rs.builtin, c.argv, &rs.scratch); ok {
		return bd
	}
	return Decision{Verdict: Allow}
}

// strongest returns the decision of the first of the strongest rules of
// list that match argv; sc, when set, confines the rules marked so.
func strongest(list []*rule, argv []string, sc *scratch) (Decision, bool) {
	var found *rule
	for _, r := range list {
		if (found == nil || r.kind.rank() > found.kind.rank()) && r.match(argv) && !(r.confined && sc != nil && sc.confines(argv)) {
			found = r
		}
	}
	if found == nil {
		return Decision{}, false
	}
	reason := found.r.Reason
	if reason == "" {
		reason = "rule " + found.ref.String()
	}
	ref := found.ref
	return Decision{Verdict: found.kind, Rule: &ref, Reason: reason, Command: slices.Clone(argv)}, true
}
