package sandbox

import (
	"testing"

	"github.com/moatbox/moat/audit"
)

// A run's stream over its rate drops its network records and the
// decisions --learn let through, counted in a record naming the run, and
// keeps the rules' decisions and the run's end.
func TestRunAuditBounded(t *testing.T) {
	var out []any
	a := NewRunAudit(func(r any) { out = append(out, r) }, 50, 2)
	net := audit.NetworkRecord{Type: audit.TypeNetwork, RunID: "r1", Decision: "deny"}
	a.Write(net)
	a.Write(net)
	if len(out) != 2 {
		t.Fatalf("within the burst: %d written, want 2", len(out))
	}
	for range 10 {
		a.Write(net)
		a.Write(audit.Decision{Type: audit.TypeDecision, RunID: "r1", Outcome: OutcomeLearn})
	}
	if len(out) != 2 {
		t.Fatalf("over the rate: %d written, want 2", len(out))
	}
	a.Write(audit.Decision{Type: audit.TypeDecision, RunID: "r1", Verdict: "deny", Outcome: "denied"})
	a.Write(audit.RunRecord{Type: audit.TypeRun, RunID: "r1"})
	a.Close()
	if len(out) != 5 {
		t.Fatalf("kept records: %#v", out[2:])
	}
	d, ok := out[2].(audit.Dropped)
	if !ok || d.RunID != "r1" || d.Count != 20 || d.Types[audit.TypeNetwork] != 10 || d.Types[audit.TypeDecision] != 10 {
		t.Fatalf("the count of the dropped: %#v", out[2])
	}
	if r, ok := out[3].(audit.Decision); !ok || r.Verdict != "deny" {
		t.Fatalf("the rules' decision: %#v", out[3])
	}
	if _, ok := out[4].(audit.RunRecord); !ok {
		t.Fatalf("the run's end: %#v", out[4])
	}
}
