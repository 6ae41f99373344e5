package sandbox

import (
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
