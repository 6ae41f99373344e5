package sandbox_test

import (
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
func TestSessionCPUBudgetCountsBackground(t *testing.T) {
	for _, tc := range []struct {
		budget, reason string
	}{
		{"300ms", "budget:cpu"},
		{"1h", "exit:"},
	} {
		p, err := policy.Parse("budgets.toml", []byte("[budgets]\ncpu = \""+tc.budget+"\"\n"))
		if err != nil {
			t.Fatal(err)
		}
		s := newSession(t, t.TempDir(), func(q *policy.Policy) { q.Budgets = p.Budgets })
		// The loop outlives its command, re-parented to the session's
		// init, and ends by itself.
		_, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, `(timeout 2 sh -c 'while :; do :; done' >/dev/null 2>&1 &); exit 0`)
		if err != nil || rep.Reason != "exit" {
			t.Fatalf("first command: %v %q", err, rep.Reason)
		}
		time.Sleep(2500 * time.Millisecond)
		_, rep, _ = sessionSh(t, s, sandbox.ExecRequest{}, "true")
		if got := rep.Reason + ":" + rep.Budget; got != tc.reason {
			t.Errorf("cpu budget %s: the command after a background loop ended %q (%s), want %q", tc.budget, got, strings.TrimSpace(rep.Error), tc.reason)
		}
	}
}
