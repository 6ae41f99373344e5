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

// TestSummaryNamesIPv6InBrackets: a refused IPv6 destination is named
// as an address and a port can be told apart ([fd00::1]:8080), as a name
// is (host:port, the control).
func TestSummaryNamesIPv6InBrackets(t *testing.T) {
	var s Summary
	s.Add(Event{Proto: ProtoTCP, Decision: DecisionDeny, Host: "fd00:ec2::254", Port: 8080, Rule: "private address"})
	s.Add(Event{Proto: ProtoHTTP, Decision: DecisionDeny, Host: "example.org", Port: 80, Rule: RuleDefaultDeny})
	got := map[string]bool{}
	for _, r := range s.Refused() {
		got[r.Dest] = true
	}
	if !got["[fd00:ec2::254]:8080"] || !got["example.org:80"] {
		t.Errorf("refused destinations %v", got)
	}
}

// TestSummaryByRule: one destination refused by two rules is listed with
// each, counted apart; the same rule again only counts (the control).
func TestSummaryByRule(t *testing.T) {
	var s Summary
	for _, rule := range []string{"secret path", "secret method", "secret path"} {
		s.Add(Event{Proto: ProtoHTTP, Decision: DecisionDeny, Host: "api.test", Port: 443, Rule: rule})
	}
	r := s.Refused()
	if len(r) != 2 || r[0].Rule != "secret path" || r[0].Count != 2 || r[1].Rule != "secret method" || r[1].Count != 1 {
		t.Fatalf("refusals %+v", r)
	}
	if line := s.String(); !strings.Contains(line, "api.test:443 ×2 (secret path), api.test:443 (secret method)") {
		t.Errorf("summary %q", line)
	}
}
