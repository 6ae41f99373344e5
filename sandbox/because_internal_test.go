package sandbox

import (
	"strings"
	"testing"

	"github.com/moatbox/moat/harness"
)

// TestBecause: a rule without a reason of its own is named once in a
// message, not again as its reason; a reason of its own is kept.
func TestBecause(t *testing.T) {
	ref := harness.RuleRef{Name: "nopy"}
	d := harness.Decision{Rule: &ref, Reason: "rule " + ref.String()}
	if got := because(d); got != "" {
		t.Errorf("the default reason: %q", got)
	}
	d.Reason = "python is not for this"
	if got := because(d); got != ": python is not for this" {
		t.Errorf("a reason of its own: %q", got)
	}
}

// TestShellQuoteEscapes: a word with characters a terminal acts on is
// written as $'...' with their escapes, never raw; others as before.
func TestShellQuoteEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"git push origin \x1b[2J\x1b[31mX\u202eY": `git push origin $'\x1b[2J\x1b[31mX\u202eY'`,
		"echo it's": `echo 'it'\''s'`,
		"ls":        "ls",
		// A C1 control as a character, and a byte of none: each as
		// bash reads it back to the same bytes.
		"x \u009dy\xffz":      `x $'\u009dy\xffz'`,
		"git A\u3000B\u00a0C": "git 'A\u3000B\u00a0C'",
		"git A\u2800B":        `git $'A\u2800B'`,
	} {
		if got := shellQuote(strings.Split(in, " ")); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
