package harness

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Scope is how far a person's approval reaches.
type Scope string

// The scopes, narrowest first.
const (
	// ScopeOnce: the exact argv (in the working directory Dir, when one
	// is given), one time.
	ScopeOnce Scope = "once"
	// ScopePrefix: any command whose words begin with Argv, until the
	// approval expires.
	ScopePrefix Scope = "prefix"
	// ScopeSession: anything the same rule asks about, until the approval
	// expires or the session (for moat run, the run) ends.
	ScopeSession Scope = "session"
)

// Grant is one approval: what a person let run, how far it reaches and
// until when. It never widens the sandbox: what it covers runs under the
// same policy.
type Grant struct {
	Scope Scope `json:"scope"`
	// Argv is the command approved (ScopeOnce) or the words it must
	// begin with (ScopePrefix).
	Argv []string `json:"argv,omitempty"`
	// Dir, for ScopeOnce, is the working directory it must run in; ""
	// for any.
	Dir string `json:"dir,omitempty"`
	// Rule, for ScopeSession, is the rule whose asks it answers.
	Rule *RuleRef `json:"rule,omitempty"`
	// Expires ends it; the zero time never does (a once grant is used
	// up anyway).
	Expires time.Time `json:"expires,omitzero"`
	// By says who approved ("tty").
	By string `json:"by,omitempty"`
}

// covers reports whether g lets argv (run in dir, asked about by d) run.
func (g *Grant) covers(argv []string, dir string, d Decision) bool {
	switch g.Scope {
	case ScopeOnce:
		return slices.Equal(g.Argv, argv) && (g.Dir == "" || g.Dir == dir)
	case ScopePrefix:
		// The words approved begin the command line, or the simple
		// command of it the rules asked about (a shell line's, as
		// NewGrant took them from d.Command). Each program the line
		// starts is decided again at its exec, with its own argv.
		begins := func(words []string) bool {
			return len(g.Argv) > 0 && len(words) >= len(g.Argv) && slices.Equal(g.Argv, words[:len(g.Argv)])
		}
		return begins(argv) || begins(d.Command)
	case ScopeSession:
		return g.Rule != nil && d.Rule != nil && *g.Rule == *d.Rule
	}
	return false
}

// Approvals are the grants of one run or session. The zero value is
// empty and ready; it is safe for concurrent use.
type Approvals struct {
	mu     sync.Mutex
	grants []Grant
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Add records g.
func (ap *Approvals) Add(g Grant) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ap.grants = append(ap.grants, g)
}

// Use returns a grant that lets argv run in dir, which the rules ask
// about with d, and whether there is one. A once grant is used up; an
// expired grant is dropped. Only an ask can be approved: a deny stays.
func (ap *Approvals) Use(argv []string, dir string, d Decision) (Grant, bool) {
	if d.Verdict != Ask {
		return Grant{}, false
	}
	now := time.Now
	if ap.Now != nil {
		now = ap.Now
	}
	t := now()
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ap.grants = slices.DeleteFunc(ap.grants, func(g Grant) bool { return !g.Expires.IsZero() && !t.Before(g.Expires) })
	for i, g := range ap.grants {
		if g.covers(argv, dir, d) {
			if g.Scope == ScopeOnce {
				ap.grants = slices.Delete(ap.grants, i, i+1)
			}
			return g, true
		}
	}
	return Grant{}, false
}

// UseScoped is Use for the grants that last (scope prefix or session):
// a command line decided before it runs is let through by what a person
// approved for a while, never by a once grant left for a program that an
// earlier line, approved, was to start.
func (ap *Approvals) UseScoped(argv []string, dir string, d Decision) (Grant, bool) {
	if d.Verdict != Ask {
		return Grant{}, false
	}
	now := time.Now
	if ap.Now != nil {
		now = ap.Now
	}
	t := now()
	ap.mu.Lock()
	defer ap.mu.Unlock()
	for _, g := range ap.grants {
		if g.Scope != ScopeOnce && (g.Expires.IsZero() || t.Before(g.Expires)) && g.covers(argv, dir, d) {
			return g, true
		}
	}
	return Grant{}, false
}

// MaxGrantTTL bounds how long an approval lasts: a person approving
// something for a while means the work at hand, not for good.
const MaxGrantTTL = 24 * time.Hour

// NewGrant makes the grant a person gave when asked about a, which the
// rules asked about with d: scope; for ScopePrefix, prefix, which must
// begin the command that asked (d.Command) and keep at least its program;
// ttl, how long it lasts from now (at most MaxGrantTTL; ScopeOnce may give
// 0: it is used up at once anyway); by, who approved. What the person
// was not shown cannot be approved: a wider prefix than the command's
// words, a session for an ask no rule made.
func NewGrant(scope Scope, a Action, d Decision, prefix []string, ttl time.Duration, by string, now time.Time) (Grant, error) {
	g := Grant{Scope: scope, By: by}
	if ttl < 0 || ttl > MaxGrantTTL {
		return g, fmt.Errorf("an approval lasts from 0 to %s, not %s", MaxGrantTTL, ttl)
	}
	if ttl > 0 {
		g.Expires = now.Add(ttl)
	}
	switch scope {
	case ScopeOnce:
		g.Argv, g.Dir = slices.Clone(a.Argv), a.Dir
		return g, nil
	case ScopePrefix:
		cmd := d.Command
		if len(cmd) == 0 {
			cmd = a.Argv
		}
		if len(prefix) == 0 || len(prefix) > len(cmd) || !slices.Equal(prefix, cmd[:len(prefix)]) {
			return g, fmt.Errorf("%q does not begin the command asked about, %q", prefix, cmd)
		}
		g.Argv = slices.Clone(prefix)
	case ScopeSession:
		if d.Rule == nil {
			return g, errors.New("only an ask a rule made can be approved for the session; this one is about the command line itself")
		}
		r := *d.Rule
		g.Rule = &r
	default:
		return g, fmt.Errorf("unknown scope %q", scope)
	}
	if ttl == 0 {
		return g, fmt.Errorf("a %s approval needs an expiry", scope)
	}
	return g, nil
}
