package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

const writeRules = `
[[rules]]
name = "no-env"
match = { write = "**/*.env" }
decision = "deny"
reason = "secrets stay out"
examples_match = ["a/prod.env"]

[[rules]]
name = "deploy-asks"
match = { write = "deploy/**" }
decision = "ask"
reason = "deploy files go live"
`

// writeApprover approves a write with a grant of scope, and counts its asks.
type writeApprover struct {
	scope harness.Scope
	asked int
}

func (a *writeApprover) Name() string { return "test" }

func (a *writeApprover) Approve(context.Context, harness.Action, harness.Decision) (bool, error) {
	return false, errors.New("unused")
}

func (a *writeApprover) ApproveScoped(_ context.Context, act harness.Action, d harness.Decision) (*harness.Grant, error) {
	a.asked++
	if act.Write == "" || len(act.Argv) != 2 {
		return nil, errors.New("not a write")
	}
	if a.scope == "" {
		return nil, nil
	}
	g, err := harness.NewGrant(a.scope, act, d, nil, time.Minute, "test", time.Now())
	return &g, err
}

// TestWriteGate: the write rules decide the API's changes: a deny names
// its rule, an ask goes to the approver (refused without one, or when it
// says no), a session approval holds for the rule's later asks, and a
// path no rule matches goes through unasked and unaudited. Every other
// decision is audited.
func TestWriteGate(t *testing.T) {
	p, err := policy.Parse("w.toml", []byte(writeRules))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	var recs []audit.Decision
	g := sandbox.NewWriteGate(p, "sess-1", func(d audit.Decision) error { recs = append(recs, d); return nil })
	ctx := context.Background()

	if _, err := g.Check(ctx, sandbox.WriteFile, "src/main.go", nil); err != nil || len(recs) != 0 {
		t.Errorf("no rule: %v, %d records", err, len(recs))
	}
	_, err = g.Check(ctx, sandbox.WriteFile, "deploy/prod.env", &writeApprover{scope: harness.ScopeSession})
	if !errors.Is(err, sandbox.ErrDenied) || !strings.Contains(err.Error(), "no-env") || !strings.Contains(err.Error(), "secrets stay out") {
		t.Errorf("deny: %v", err)
	}
	if _, err := g.Check(ctx, sandbox.WriteMkdir, "deploy/x", nil); !errors.Is(err, sandbox.ErrDenied) || !strings.Contains(err.Error(), "nobody can be asked") {
		t.Errorf("ask without an approver: %v", err)
	}
	no := &writeApprover{}
	if _, err := g.Check(ctx, sandbox.WriteRemove, "deploy/x", no); !errors.Is(err, sandbox.ErrDenied) || no.asked != 1 {
		t.Errorf("ask refused: %v (asked %d)", err, no.asked)
	}
	yes := &writeApprover{scope: harness.ScopeSession}
	for _, f := range []string{"deploy/a.yaml", "deploy/b.yaml"} {
		if _, err := g.Check(ctx, sandbox.WriteFile, f, yes); err != nil {
			t.Errorf("approved %s: %v", f, err)
		}
	}
	if yes.asked != 1 {
		t.Errorf("a session approval did not hold for the rule's next ask: asked %d times", yes.asked)
	}
	want := []string{"deny", "no approver", "denied", "approved", "approved"}
	if len(recs) != len(want) {
		t.Fatalf("audit: %+v", recs)
	}
	for i, r := range recs {
		got := r.Outcome
		if got == "" {
			got = r.Verdict
		}
		if got != want[i] || r.At != "write" || r.RunID != "sess-1" || r.Rule == "" {
			t.Errorf("record %d: %+v, want %s", i, r, want[i])
		}
	}
	// A link must not carry a change past a rule.
	d, _ := g.Check(ctx, sandbox.WriteFile, "link/app.yaml", nil)
	if err := g.Follow(sandbox.WriteFile, "link/app.yaml", "deploy/app.yaml", d); !errors.Is(err, sandbox.ErrDenied) || !strings.Contains(err.Error(), "deploy-asks") {
		t.Errorf("through a link: %v", err)
	}
	if err := g.Follow(sandbox.WriteFile, "link/app.yaml", "src/app.yaml", d); err != nil {
		t.Errorf("a link to a path no rule matches: %v", err)
	}
}

// TestWriteGateLearn: in learn mode the write rules' denials and asks let
// the change through, each audited with the outcome "learn"; the same
// gate out of learn mode refuses them (the control, TestWriteGate).
func TestWriteGateLearn(t *testing.T) {
	p, err := policy.Parse("w.toml", []byte(writeRules))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	var recs []audit.Decision
	g := sandbox.NewWriteGate(p, "sess-1", func(d audit.Decision) error { recs = append(recs, d); return nil })
	ctx := context.Background()
	if _, err := g.Check(ctx, sandbox.WriteFile, "deploy/prod.env", nil); !errors.Is(err, sandbox.ErrDenied) {
		t.Fatalf("not learning: %v, want a refusal", err)
	}
	g.Learn = true
	recs = nil
	for _, f := range []string{"deploy/prod.env", "deploy/x"} {
		d, err := g.Check(ctx, sandbox.WriteFile, f, nil)
		if err != nil || g.Follow(sandbox.WriteFile, f, "elsewhere/"+f, d) != nil {
			t.Errorf("learning %s: %v", f, err)
		}
	}
	if len(recs) != 2 || recs[0].Outcome != sandbox.OutcomeLearn || recs[1].Outcome != sandbox.OutcomeLearn {
		t.Errorf("records %+v, want two with outcome learn", recs)
	}
}
