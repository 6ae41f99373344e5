package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
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
	small := 2*probeCPU(t, `(true &); exit 0`) + 300*time.Millisecond
	loop := int((small + 2*time.Second + time.Second - 1) / time.Second)
	for _, tc := range []struct {
		budget time.Duration
		reason string
	}{
		{small, "budget:cpu"},
		{time.Hour, "exit:"},
	} {
		s := cpuBudgetSession(t, tc.budget)
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

// TestSessionCPUBudgetEndsCommands: commands under way spend the session's
// cpu budget together, counted by the sandbox as they run, and are ended
// (reason budget, cpu) once it is spent, not only refused after. The
// control: the same commands with a budget that holds them run to the end.
// The budget is sized from a probe session, as above.
func TestSessionCPUBudgetEndsCommands(t *testing.T) {
	small := 2*probeCPU(t, `true`) + time.Second
	for _, tc := range []struct {
		budget time.Duration
		reason string
	}{
		{small, "budget:cpu"},
		{time.Hour, "exit:"},
	} {
		s := cpuBudgetSession(t, tc.budget)
		// Together they spin for longer than the budget even on one CPU.
		spin := fmt.Sprintf(`timeout %d sh -c 'while :; do :; done'; exit 0`, int(small/time.Second)+2)
		var procs []*sandbox.Process
		for range 2 {
			proc, err := s.Start(context.Background(), &sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", spin}}, backend.Stdio{})
			if err != nil {
				t.Fatal(err)
			}
			procs = append(procs, proc)
		}
		for i, proc := range procs {
			rep, err := proc.Wait()
			if got := rep.Reason + ":" + rep.Budget; err != nil || got != tc.reason {
				t.Errorf("cpu budget %v: command %d ended %q (%v), want %q", tc.budget, i, got, err, tc.reason)
			}
		}
	}
}

// probeCPU is the CPU time a session spends on its start and on script.
func probeCPU(t *testing.T, script string) time.Duration {
	t.Helper()
	probe := newSession(t, t.TempDir(), nil)
	if _, rep, err := sessionSh(t, probe, sandbox.ExecRequest{}, script); err != nil || rep.Reason != "exit" {
		t.Fatalf("probe: %v %+v", err, rep)
	}
	return probe.Stats().CPU
}

// cpuBudgetSession is a session whose policy has a cpu budget of d. Where
// the sandbox cannot count every process's CPU time (no cgroup for this
// user) the session is refused unless degradation is allowed
// (TestSessionCPUBudgetCountsReapedChildren): these tests allow it, as
// what they spend is counted either way.
func cpuBudgetSession(t *testing.T, d time.Duration) *sandbox.Session {
	t.Helper()
	s, err := createCPUBudgetSession(t, d, true)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// createCPUBudgetSession makes a session whose policy has a cpu budget of
// d, closed when the test ends.
func createCPUBudgetSession(t *testing.T, d time.Duration, allowDegraded bool) (*sandbox.Session, error) {
	t.Helper()
	p, err := policy.Parse("budgets.toml", []byte(fmt.Sprintf("[budgets]\ncpu = \"%dms\"\n", d.Milliseconds())))
	if err != nil {
		t.Fatal(err)
	}
	q := policy.Default()
	ws := t.TempDir()
	q.Workspace.Path = ws
	q.Budgets = p.Budgets
	home, _ := os.UserHomeDir()
	if err := q.Resolve(ws, home); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: q, AllowDegraded: allowDegraded})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s, nil
}
