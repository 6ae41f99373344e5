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

// TestPrefixGrantCoversShellLines: a prefix grant made from the ask about
// a shell line (its words from the simple command the rules asked about)
// covers the next shell line whose asked command begins with them, as it
// covers a direct command; not one whose asked command does not.
func TestPrefixGrantCoversShellLines(t *testing.T) {
	now := time.Now()
	rs := New(mustPolicy(t, "[[rules]]\nname = \"danger\"\nmatch = { command = [\"danger\"] }\ndecision = \"ask\"\n"))
	line := func(s string) ([]string, Decision) {
		argv := []string{"sh", "-c", s}
		return argv, rs.Decide(Action{Argv: argv, Dir: "/ws"})
	}
	argv, d := line("./danger 5")
	if d.Verdict != Ask || len(d.Command) == 0 {
		t.Fatalf("control: the line's decision: %+v", d)
	}
	g, err := NewGrant(ScopePrefix, Action{Argv: argv, Dir: "/ws"}, d, []string{"./danger"}, time.Hour, "t", now)
	if err != nil {
		t.Fatal(err)
	}
	ap := &Approvals{Now: func() time.Time { return now }}
	ap.Add(g)
	for _, s := range []string{"./danger 5", "./danger 9 && echo done"} {
		argv, d := line(s)
		if _, ok := ap.UseScoped(argv, "/ws", d); !ok {
			t.Errorf("sh -c %q: not covered by the prefix grant", s)
		}
	}
	if _, ok := ap.UseScoped([]string{"./danger", "10"}, "/ws", rs.Decide(Action{Argv: []string{"./danger", "10"}, Dir: "/ws"})); !ok {
		t.Error("a direct command: not covered")
	}
	rs2 := New(mustPolicy(t, "[[rules]]\nname = \"other\"\nmatch = { command = [\"other\"] }\ndecision = \"ask\"\n"))
	argv = []string{"sh", "-c", "./other 1"}
	if _, ok := ap.UseScoped(argv, "/ws", rs2.Decide(Action{Argv: argv, Dir: "/ws"})); ok {
		t.Error("a line asking about another command was covered")
	}
}
