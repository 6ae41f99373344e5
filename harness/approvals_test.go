package harness

import (
	"testing"
	"time"
)

func TestUseScoped(t *testing.T) {
	now := time.Now()
	rule := &RuleRef{Set: SetPolicy, Name: "ship"}
	ask := Decision{Verdict: Ask, Rule: rule}
	ap := &Approvals{Now: func() time.Time { return now }}
	ap.Add(Grant{Scope: ScopeOnce, Argv: []string{"git", "push"}})
	// A once grant, left for a program a line was to start, does not let
	// a later command line through.
	if _, ok := ap.UseScoped([]string{"git", "push"}, "", ask); ok {
		t.Error("a once grant let a command line through")
	}
	ap.Add(Grant{Scope: ScopePrefix, Argv: []string{"git", "push"}, Expires: now.Add(time.Minute)})
	if g, ok := ap.UseScoped([]string{"git", "push", "origin"}, "", ask); !ok || g.Scope != ScopePrefix {
		t.Errorf("prefix grant: %+v %v", g, ok)
	}
	// It lasts: used again, and not past its expiry.
	if _, ok := ap.UseScoped([]string{"git", "push"}, "", ask); !ok {
		t.Error("a prefix grant was used up")
	}
	if _, ok := ap.UseScoped([]string{"git", "push"}, "", Decision{Verdict: Deny, Rule: rule}); ok {
		t.Error("a grant let a deny through")
	}
	now = now.Add(2 * time.Minute)
	if _, ok := ap.UseScoped([]string{"git", "push"}, "", ask); ok {
		t.Error("an expired grant let a command line through")
	}
	// The once grant is still there for the exec it was left for.
	if _, ok := ap.Use([]string{"git", "push"}, "", ask); !ok {
		t.Error("the once grant is gone")
	}
}
