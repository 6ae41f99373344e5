package sandbox_test

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
)

// TestSessionCPUBudgetCountsReapedChildren: the CPU time of processes
// the kernel reaps by itself (their parent ignores SIGCHLD, so nobody
// waits for them and no parent's count of its children holds them)
// counts against the session's cpu budget: a command that spends it in
// such short-lived children is ended, or the next command refused. The
// sandbox needs a cgroup to count them; where it can have none, a
// session with a cpu budget is refused, and with degradation allowed it
// runs and its reports say the budget is not enforced exactly.
// Positive controls: the same children waited for by their parent, a
// budget that holds them all, and, where the session is refused, the
// same session without a cpu budget.
func TestSessionCPUBudgetCountsReapedChildren(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl is not installed")
	}
	if _, refused := createCPUBudgetSession(t, time.Hour, false); refused != nil {
		if !errors.Is(refused, sandbox.ErrRefused) || !errors.Is(refused, backend.ErrNoCPUCount) {
			t.Fatalf("a session with a cpu budget: %v, want a refusal naming the CPU count", refused)
		}
		s := newSession(t, t.TempDir(), nil) // the control: no budget, no refusal
		if _, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, "true"); err != nil || rep.Reason != "exit" {
			t.Fatalf("a session without a cpu budget: %v %+v", err, rep)
		}
		d := cpuBudgetSession(t, time.Hour)
		_, rep, err := sessionSh(t, d, sandbox.ExecRequest{}, "true")
		if err != nil || !strings.Contains(strings.Join(rep.Degraded, "\n"), "cpu budget") {
			t.Errorf("degraded session: %v, Degraded %q, want the cpu budget named", err, rep.Degraded)
		}
		t.Skipf("no cgroup to count every process's CPU time here: refused (%v)", refused)
	}
	small := 2*probeCPU(t, `true`) + time.Second
	loop := int(small/time.Second) + 3
	// Each child spins for a fraction of the budget's poll, then exits;
	// the parent waits for it to end (with SIGCHLD ignored, waitpid
	// returns once the kernel has reaped it).
	script := func(ignore bool) string {
		sig := ""
		if ignore {
			sig = `$SIG{CHLD} = "IGNORE";`
		}
		return fmt.Sprintf(`exec perl -e '%s my $end = time + %d; while (time < $end) { my $p = fork; if (!$p) { my $s = (times)[0]; 1 while (times)[0] - $s < 0.03; exit 0 } waitpid($p, 0) }'`, sig, loop)
	}
	for _, tc := range []struct {
		name   string
		budget time.Duration
		ignore bool
		want   string
	}{
		{"reaped by the kernel", small, true, "budget:cpu"},
		{"waited for", small, false, "budget:cpu"},
		{"within the budget", time.Hour, true, "exit:"},
	} {
		s, err := createCPUBudgetSession(t, tc.budget, false)
		if err != nil {
			t.Fatal(err)
		}
		_, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, script(tc.ignore))
		got := rep.Reason + ":" + rep.Budget
		if got == "exit:" {
			// Ended before the poll saw it spent: the next command is
			// refused then.
			_, rep, err = sessionSh(t, s, sandbox.ExecRequest{}, "true")
			got = rep.Reason + ":" + rep.Budget
		}
		if got != tc.want {
			t.Errorf("%s (cpu budget %v): %q (%v %s), want %q; the sandbox counted %v", tc.name, tc.budget, got, err, strings.TrimSpace(rep.Error), tc.want, s.Stats().CPU)
		}
	}
}
