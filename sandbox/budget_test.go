//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// slowApprover says yes after a while: a person thinking.
type slowApprover struct{ after time.Duration }

func (a slowApprover) Name() string { return "slow" }

func (a slowApprover) Approve(ctx context.Context, _ harness.Action, _ harness.Decision) (bool, error) {
	select {
	case <-time.After(a.after):
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// TestBudgets: each budget ends the run (or refuses what would spend
// more) with reason "budget" naming it; the wall budget does not count
// the time a person takes to answer (the positive control: the same
// budget with a slow answer inside it).
func TestBudgets(t *testing.T) {
	for _, tt := range []struct {
		name   string
		toml   string
		script string
		ap     sandbox.Approver
		reason string
		budget string
	}{
		{"wall", "[budgets]\nwall = \"300ms\"\n", "sleep 5", nil, sandbox.ReasonBudget, "wall"},
		// The wait is longer than the budget, the work well within it even
		// on an emulated machine.
		{"wall without the wait", execRules + "[budgets]\nwall = \"2s\"\n", "x=-u; id $x >/dev/null; sleep 0.3; echo ok", slowApprover{2500 * time.Millisecond}, "exit", ""},
		{"wall with the wait", execRules + "[budgets]\nwall = \"1s\"\n", "x=-u; id $x >/dev/null; sleep 5", slowApprover{300 * time.Millisecond}, sandbox.ReasonBudget, "wall"},
		{"output", "[budgets]\noutput = \"100\"\n", "yes | head -c 100000", nil, sandbox.ReasonBudget, "output"},
		{"cpu", "[budgets]\ncpu = \"1s\"\n", "while :; do :; done", nil, sandbox.ReasonBudget, "cpu"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			req := &sandbox.Request{Backend: testBackend(), Policy: execPolicy(t, ws, tt.toml), Args: []string{"sh", "-c", tt.script}, Approver: tt.ap}
			var out bytes.Buffer
			start := time.Now()
			rep, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Reason != tt.reason || rep.Budget != tt.budget {
				t.Errorf("reason %q budget %q, want %q %q (exit %d, %s)", rep.Reason, rep.Budget, tt.reason, tt.budget, rep.ExitCode, time.Since(start))
			}
		})
	}
}

// TestRunsBudget: a session's Spend carries across runs, and a run past
// the runs budget does not start.
func TestRunsBudget(t *testing.T) {
	ws := t.TempDir()
	p := execPolicy(t, ws, "[budgets]\nruns = 1\n")
	spend := harness.NewSpend(p.Budgets)
	for i, want := range []string{"exit", sandbox.ReasonBudget} {
		rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"true"}, Spend: spend}, backend.Stdio{})
		if rep.Reason != want || (want == sandbox.ReasonBudget) != (err != nil) || want == sandbox.ReasonBudget && rep.Budget != "runs" {
			t.Errorf("run %d: reason %q budget %q err %v, want %q", i+1, rep.Reason, rep.Budget, err, want)
		}
	}
}

// TestRequestBudget: the request past a host's budget is refused with a
// 403 naming the budget; another host is not counted.
func TestRequestBudget(t *testing.T) {
	w := newNetWorld(t)
	req := w.request(func(p *policy.Policy) {
		p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
		p.Budgets.Requests = map[string]int{"allowed.test": 2}
	})
	out, rep := w.run(t, req, fmt.Sprintf(`for i in 1 2 3; do
  echo "$i: $(curl -sS -m 10 -D - -o /dev/null http://allowed.test:%d/ | tr -d '\r' | grep -e '^HTTP' -e '^X-Moat-Denied' | tr '\n' ' ')"
done`, w.httpPort))
	for _, want := range []string{"1: HTTP/1.1 200", "2: HTTP/1.1 200", "3: HTTP/1.1 403 Forbidden X-Moat-Denied: budget requests[allowed.test]"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if rep.Budget != "requests[allowed.test]" {
		t.Errorf("report budget %q", rep.Budget)
	}
}

// TestNetworkBudget: once the bytes through the proxy reach the network
// budget, the next connection is refused with a 403 naming it.
func TestNetworkBudget(t *testing.T) {
	w := newNetWorld(t)
	req := w.request(func(p *policy.Policy) {
		p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
		p.Budgets.Network = 10 // one response is more than this
	})
	out, rep := w.run(t, req, fmt.Sprintf(`for i in 1 2; do
  echo "$i: $(curl -sS -m 10 -D - -o /dev/null http://allowed.test:%d/ | tr -d '\r' | grep -e '^HTTP' -e '^X-Moat-Denied' | tr '\n' ' ')"
done`, w.httpPort))
	for _, want := range []string{"1: HTTP/1.1 200", "2: HTTP/1.1 403 Forbidden X-Moat-Denied: budget network"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if rep.Budget != "network" {
		t.Errorf("report budget %q", rep.Budget)
	}
}
