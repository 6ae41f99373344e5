package sandbox

import (
	"context"
	"sync"
	"time"

	"github.com/moatbox/moat/harness"
)

// ReasonBudget is Report.Reason for a run a budget ended (Report.Budget
// names it).
const ReasonBudget = "budget"

// budgetClock counts a run's time not spent waiting for a person, and
// ends the run (cancel, with a *harness.BudgetError as the cause) once
// that reaches the wall budget. An ask pauses it for as long as it waits.
type budgetClock struct {
	mu       sync.Mutex
	start    time.Time
	waited   time.Duration
	waiting  int // asks under way
	waitFrom time.Time
	budget   time.Duration // 0: none
	cancel   context.CancelCauseFunc
	timer    *time.Timer
}

func newBudgetClock(budget time.Duration, cancel context.CancelCauseFunc) *budgetClock {
	c := &budgetClock{start: time.Now(), budget: budget, cancel: cancel}
	if budget > 0 {
		c.timer = time.AfterFunc(budget, c.check)
	}
	return c
}

// active is the time so far not spent waiting; c.mu is held.
func (c *budgetClock) active(now time.Time) time.Duration {
	d := now.Sub(c.start) - c.waited
	if c.waiting > 0 {
		d -= now.Sub(c.waitFrom)
	}
	return d
}

func (c *budgetClock) check() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting > 0 {
		return // resume arms it again
	}
	if left := c.budget - c.active(time.Now()); left > 0 {
		c.timer.Reset(left)
		return
	}
	c.cancel(&harness.BudgetError{Name: "wall", Limit: int64(c.budget)})
}

// pause stops the clock while a person is asked; resume starts it again.
func (c *budgetClock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting == 0 {
		c.waitFrom = time.Now()
	}
	c.waiting++
}

func (c *budgetClock) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting--; c.waiting > 0 {
		return
	}
	c.waited += time.Since(c.waitFrom)
	if c.timer != nil {
		c.timer.Reset(max(c.budget-c.active(time.Now()), 0))
	}
}

// stop ends the clock and returns the time counted.
func (c *budgetClock) stop() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	return c.active(time.Now())
}
