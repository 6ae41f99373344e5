package sandbox_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestSessionCPUBudgetCountsBackground: the CPU a command's background
// process spends after the command has ended counts against the
// session's cpu budget: once it has spent it, the next command is
// refused. Positive control: the same commands in a session with a
// larger budget run.
//
// The sandbox's own CPU counts too (its init's start, the first
// command's shell): under emulation (the QEMU guest) that alone can pass
// a small budget, so the budget is what a probe session spent on the same
// start and command, twice over, plus 300 ms, and the background loop
// runs two seconds longer than that.
func TestSessionCPUBudgetCountsBackground(t *testing.T) {
	probe := newSession(t, t.TempDir(), nil)
	if _, rep, err := sessionSh(t, probe, sandbox.ExecRequest{}, `(true &); exit 0`); err != nil || rep.Reason != "exit" {
		t.Fatalf("probe: %v %+v", err, rep)
	}
	small := 2*probe.Stats().CPU + 300*time.Millisecond
	loop := int((small + 2*time.Second + time.Second - 1) / time.Second)
	for _, tc := range []struct {
		budget time.Duration
		reason string
	}{
		{small, "budget:cpu"},
		{time.Hour, "exit:"},
	} {
		p, err := policy.Parse("budgets.toml", []byte(fmt.Sprintf("[budgets]\ncpu = \"%dms\"\n", tc.budget.Milliseconds())))
		if err != nil {
			t.Fatal(err)
		}
		s := newSession(t, t.TempDir(), func(q *policy.Policy) { q.Budgets = p.Budgets })
		// The loop outlives its command, re-parented to the session's
		// init, and ends by itself.
		_, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, fmt.Sprintf(`(timeout %d sh -c 'while :; do :; done' >/dev/null 2>&1 &); exit 0`, loop))
		if err != nil || rep.Reason != "exit" {
			t.Fatalf("cpu budget %v: first command: %v %q (%s)", tc.budget, err, rep.Reason, strings.TrimSpace(rep.Error))
		}
		time.Sleep(time.Duration(loop)*time.Second + 500*time.Millisecond)
		_, rep, _ = sessionSh(t, s, sandbox.ExecRequest{}, "true")
		if got := rep.Reason + ":" + rep.Budget; got != tc.reason {
			t.Errorf("cpu budget %v: the command after a background loop ended %q (%s), want %q", tc.budget, got, strings.TrimSpace(rep.Error), tc.reason)
		}
	}
}
