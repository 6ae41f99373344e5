package main

import (
	"strings"
	"testing"
)

// TestShownArgvBounded: a command line with an argument of thousands of
// spaces, or thousands of arguments, is shown within a few lines, saying
// how much it left out, so the question's program and rule stay on the
// screen (a tester's 4000 spaces scrolled them away); the control, a short
// command line, is shown whole, quoted as before.
func TestShownArgvBounded(t *testing.T) {
	if got := shownArgv([]string{"git", "push", "origin"}); got != `["git" "push" "origin"]` {
		t.Errorf("short: %s", got)
	}
	long := shownArgv([]string{"git", "push", "evil-remote", strings.Repeat(" ", 4000) + "origin"})
	if len(long) > 300 || !strings.Contains(long, `"evil-remote"`) || !strings.Contains(long, "(4006 bytes in all)") {
		t.Errorf("long argument: %d bytes: %s", len(long), long)
	}
	many := shownArgv(append([]string{"rm"}, strings.Split(strings.Repeat("x ", 5000), " ")...))
	if len(many) > 400 || !strings.Contains(many, "more arguments") {
		t.Errorf("many arguments: %d bytes: %s", len(many), many)
	}
	// A character is not cut in two.
	if s := shownArgv([]string{strings.Repeat("é", 200)}); strings.Contains(s, `\x`) {
		t.Errorf("cut inside a character: %s", s)
	}
}
