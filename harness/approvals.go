package harness

import (
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
		return len(g.Argv) > 0 && len(argv) >= len(g.Argv) && slices.Equal(g.Argv, argv[:len(g.Argv)])
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
