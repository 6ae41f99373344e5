package egress

import (
	"fmt"
	"strings"
	"testing"
)

// TestSummaryBounded: a Summary lists the first MaxRefusals refused
// destinations and only counts refusals of later ones, which a sandbox
// makes as fast as it sends DNS queries; refusals of a listed
// destination are still counted on it (the control).
func TestSummaryBounded(t *testing.T) {
	var s Summary
	for i := range MaxRefusals + 500 {
		s.Add(Event{Proto: ProtoDNS, Decision: DecisionDeny, Host: fmt.Sprintf("x%d.denied.test", i), Rule: RuleDefaultDeny})
	}
	s.Add(Event{Proto: ProtoDNS, Decision: DecisionDeny, Host: "x0.denied.test", Rule: RuleDefaultDeny})
	s.Add(Event{Decision: DecisionAllow})
	r := s.Refused()
	if len(r) != MaxRefusals || s.Unlisted() != 500 {
		t.Fatalf("%d destinations listed, %d refusals unlisted", len(r), s.Unlisted())
	}
	if r[0].Dest != "x0.denied.test (DNS)" || r[0].Count != 2 {
		t.Errorf("first refusal %+v", r[0])
	}
	if line := s.String(); !strings.Contains(line, fmt.Sprintf("and %d more (and 500 refusals of further destinations); 1 allowed", MaxRefusals-5)) {
		t.Errorf("summary %q", line)
	}
}
