package harness

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/policy"
)

// cancelled records the cause a clock's run was ended with.
type cancelled chan error

func (c cancelled) cancel(err error) {
	select {
	case c <- err:
	default:
	}
}

func (c cancelled) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(within):
		return nil
	}
}

func wallSpent(err error) bool {
	var be *BudgetError
	return errors.As(err, &be) && be.Name == "wall"
}

// TestClocksShareTheWallBudget: two runs under way at once spend the wall
// budget together, so both are ended when together they have used it
// (about half of it each); one run alone still has time left at the same
// point (the control).
func TestClocksShareTheWallBudget(t *testing.T) {
	const budget = time.Second
	s := NewSpend(policy.Budgets{Wall: policy.Duration(budget)})
	a, b := make(cancelled, 1), make(cancelled, 1)
	start := time.Now()
	ca, cb := s.StartClock(a.cancel), s.StartClock(b.cancel)
	if err := a.wait(t, 5*time.Second); !wallSpent(err) {
		t.Fatalf("first run: cause %v, want the wall budget", err)
	}
	if err := b.wait(t, time.Second); !wallSpent(err) {
		t.Fatalf("second run: cause %v, want the wall budget", err)
	}
	if took := time.Since(start); took >= budget*9/10 {
		t.Errorf("two runs spent the budget in %s, want about half of %s", took, budget)
	}
	da, spentA := ca.Stop()
	db, spentB := cb.Stop()
	if !spentA || !spentB || da+db < budget {
		t.Errorf("stopped: %s %v, %s %v; want both spent, %s in all", da, spentA, db, spentB, budget)
	}
	if _, _, _, err := s.Left(); !wallSpent(err) {
		t.Errorf("Left after: %v, want the wall budget spent", err)
	}

	alone := NewSpend(policy.Budgets{Wall: policy.Duration(budget)})
	c := make(cancelled, 1)
	cc := alone.StartClock(c.cancel)
	if err := c.wait(t, budget*6/10); err != nil {
		t.Errorf("one run alone ended at %s: %v", budget*6/10, err)
	}
	if d, spent := cc.Stop(); spent || d >= budget {
		t.Errorf("one run alone: %s spent %v", d, spent)
	}
	if wall, _, _, err := alone.Left(); err != nil || wall <= 0 {
		t.Errorf("Left after one run: %s %v", wall, err)
	}
}

// TestClockPausedIsToldOnResume: a run waiting for a person is not ended
// while it waits, even when another run spends the budget meanwhile; it
// is ended as it resumes.
func TestClockPausedIsToldOnResume(t *testing.T) {
	s := NewSpend(policy.Budgets{Wall: policy.Duration(300 * time.Millisecond)})
	a, b := make(cancelled, 1), make(cancelled, 1)
	ca, cb := s.StartClock(a.cancel), s.StartClock(b.cancel)
	ca.Pause()
	if err := b.wait(t, 5*time.Second); !wallSpent(err) {
		t.Fatalf("running run: cause %v, want the wall budget", err)
	}
	if err := a.wait(t, 100*time.Millisecond); err != nil {
		t.Fatalf("paused run ended while it waited: %v", err)
	}
	ca.Resume()
	if err := a.wait(t, time.Second); !wallSpent(err) {
		t.Errorf("resumed run: cause %v, want the wall budget", err)
	}
	ca.Stop()
	cb.Stop()
	// Pause and Resume after Stop change nothing.
	ca.Pause()
	ca.Resume()
}

// TestOutputBudget: output is counted as it is written; the write that
// passes the budget is told how much of it fits, later ones that none does.
func TestOutputBudget(t *testing.T) {
	s := NewSpend(policy.Budgets{Output: 100})
	for _, tt := range []struct {
		n, fit int64
		spent  bool
	}{{60, 60, false}, {40, 40, false}, {1, 0, true}} {
		fit, err := s.Output(tt.n)
		if fit != tt.fit || (err != nil) != tt.spent {
			t.Errorf("Output(%d) = %d, %v; want %d, spent %v", tt.n, fit, err, tt.fit, tt.spent)
		}
	}
	s = NewSpend(policy.Budgets{Output: 100})
	if fit, err := s.Output(150); fit != 100 || err == nil {
		t.Errorf("Output(150) = %d, %v; want 100 and the budget spent", fit, err)
	}
	free := NewSpend(policy.Budgets{})
	if fit, err := free.Output(1 << 40); fit != 1<<40 || err != nil {
		t.Errorf("no budget: Output = %d, %v", fit, err)
	}
}

// TestBudgetErrorSaysTheLimit: a spent budget's message says how much it
// was, in its unit, which "the runs budget is spent" left to the policy.
func TestBudgetErrorSaysTheLimit(t *testing.T) {
	for _, tc := range []struct {
		e    BudgetError
		want string
	}{
		{BudgetError{Name: "runs", Limit: 3}, "the runs budget (3 runs, [budgets] in the policy) is spent"},
		{BudgetError{Name: "wall", Limit: int64(90 * time.Second)}, "the wall budget (1m30s, "},
		{BudgetError{Name: "network", Limit: 100}, "(100 bytes, "},
		{BudgetError{Name: "requests[api.test]", Limit: 5}, "the requests[api.test] budget (5 requests, "},
	} {
		if got := tc.e.Error(); !strings.Contains(got, tc.want) {
			t.Errorf("%+v: %q, want %q in it", tc.e, got, tc.want)
		}
	}
}
