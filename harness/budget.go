package harness

import (
	"fmt"
	"sync"
	"time"

	"github.com/moatbox/moat/internal/netrule"
	"github.com/moatbox/moat/policy"
)

// BudgetError says a budget is spent: what would spend more is refused,
// or the run it ends ends with reason "budget".
type BudgetError struct {
	// Name is the budget: "runs", "wall", "cpu", "output", "network" or
	// "requests[HOST]" (HOST as the policy writes it).
	Name string
	// Limit is the budget, in its unit (runs, requests, bytes or
	// nanoseconds).
	Limit int64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("the %s budget (%s, [budgets] in the policy) is spent", e.Name, e.limit())
}

// limit is the budget in words.
func (e *BudgetError) limit() string {
	switch {
	case e.Name == "runs":
		return fmt.Sprintf("%d runs", e.Limit)
	case e.Name == "wall" || e.Name == "cpu":
		return time.Duration(e.Limit).String()
	case e.Name == "output" || e.Name == "network":
		return fmt.Sprintf("%d bytes", e.Limit)
	}
	return fmt.Sprintf("%d requests", e.Limit)
}

// Spend counts what a session (or one run) has spent against the
// policy's [budgets]. The daemon keeps one per session across its runs;
// moat run makes one for its run. It is safe for concurrent use, and the
// wall and output budgets hold for runs under way at once: their clocks
// run together against what is left (StartClock), and output is counted
// as it is written (Output), so two commands cannot each spend what was
// left when they started.
type Spend struct {
	b       policy.Budgets
	hosts   []requestBudget
	mu      sync.Mutex
	runs    int
	wall    time.Duration // the time of the clocks stopped
	cpu     time.Duration
	output  int64
	network int64
	// clocks are the runs under way; timer fires when, at the rate they
	// run together, they will have spent the wall budget.
	clocks   map[*Clock]struct{}
	timer    *time.Timer
	requests map[string]int
}

type requestBudget struct {
	entry string
	host  netrule.Host
	limit int
}

// NewSpend starts counting against b, which must be valid (see
// policy.Policy.Validate).
func NewSpend(b policy.Budgets) *Spend {
	s := &Spend{b: b, requests: map[string]int{}, clocks: map[*Clock]struct{}{}}
	for entry, n := range b.Requests {
		h, _ := netrule.ParseHost(entry, false)
		s.hosts = append(s.hosts, requestBudget{entry: entry, host: h, limit: n})
	}
	return s
}

// StartRun counts a run, or refuses it once the runs budget is spent.
func (s *Spend) StartRun() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Runs > 0 && s.runs >= s.b.Runs {
		return &BudgetError{Name: "runs", Limit: int64(s.b.Runs)}
	}
	s.runs++
	return nil
}

// Left is what a run starting now may still use of the wall, CPU and
// output budgets; 0 where there is no budget. A spent one is refused.
// Runs under way count with the time they have run so far.
func (s *Spend) Left() (wall, cpu time.Duration, output int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	left := func(name string, budget, used int64) (int64, error) {
		if budget == 0 {
			return 0, nil
		}
		if used >= budget {
			return 0, &BudgetError{Name: name, Limit: budget}
		}
		return budget - used, nil
	}
	w, err1 := left("wall", int64(s.b.Wall), int64(s.wallUsed(time.Now())))
	c, err2 := left("cpu", int64(s.b.CPU), int64(s.cpu))
	o, err3 := left("output", int64(s.b.Output), s.output)
	for _, e := range []error{err1, err2, err3} {
		if e != nil {
			return 0, 0, 0, e
		}
	}
	return time.Duration(w), time.Duration(c), o, nil
}

// AddCPU adds the CPU time a run used.
func (s *Spend) AddCPU(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cpu += d
}

// Output counts n bytes a run wrote, as it writes them. Past the output
// budget it returns a *BudgetError and how many of the n bytes were
// within it (the run is to be ended); bytes counted after that are
// refused whole.
func (s *Spend) Output(n int64) (fit int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.output
	s.output += n
	if s.b.Output == 0 || s.output <= int64(s.b.Output) {
		return n, nil
	}
	return max(int64(s.b.Output)-before, 0), &BudgetError{Name: "output", Limit: int64(s.b.Output)}
}

// Clock counts one run's time against the wall budget: its time not spent
// waiting for a person. The clocks of runs under way at once all count,
// and once together with the runs that ended they reach the budget, each
// running clock's cancel is called (with a *BudgetError). A clock that is
// paused is told when it resumes.
type Clock struct {
	s        *Spend
	start    time.Time
	waited   time.Duration
	waiting  int // asks under way
	waitFrom time.Time
	cancel   func(error)
	spent    bool // cancel was called
	stopped  bool
	final    time.Duration // the time counted, once stopped
}

// StartClock starts counting a run's time; cancel ends the run. Stop
// must be called when the run has ended.
func (s *Spend) StartClock(cancel func(error)) *Clock {
	c := &Clock{s: s, cancel: cancel}
	s.update(func(now time.Time) {
		c.start = now
		s.clocks[c] = struct{}{}
	})
	return c
}

// update changes the clocks with s.mu held (f), then sets the timer for
// what they now spend, and calls the cancels that are due once s.mu is
// released.
func (s *Spend) update(f func(now time.Time)) {
	s.mu.Lock()
	now := time.Now()
	f(now)
	fire := s.armLocked(now)
	s.mu.Unlock()
	fire()
}

// active is the clock's time so far not spent waiting; s.mu is held.
func (c *Clock) active(now time.Time) time.Duration {
	d := now.Sub(c.start) - c.waited
	if c.waiting > 0 {
		d -= now.Sub(c.waitFrom)
	}
	return d
}

// wallUsed is the time of the stopped clocks and of the running ones so
// far; s.mu is held.
func (s *Spend) wallUsed(now time.Time) time.Duration {
	d := s.wall
	for c := range s.clocks {
		d += c.active(now)
	}
	return d
}

// armLocked sets the timer for when the running clocks, together, will
// have spent the wall budget, or, once they have, marks them spent; the
// cancels are called by the returned func, after s.mu is released.
func (s *Spend) armLocked(now time.Time) (fire func()) {
	fire = func() {}
	if s.b.Wall == 0 {
		return fire
	}
	running := 0
	for c := range s.clocks {
		if c.waiting == 0 {
			running++
		}
	}
	left := time.Duration(s.b.Wall) - s.wallUsed(now)
	switch {
	case running == 0:
		if s.timer != nil {
			s.timer.Stop()
		}
	case left > 0:
		// Each running clock spends at the same rate: the budget is gone
		// when each has spent its share of what is left.
		d := (left + time.Duration(running) - 1) / time.Duration(running)
		if s.timer == nil {
			s.timer = time.AfterFunc(d, s.check)
		} else {
			s.timer.Reset(d)
		}
	default:
		var cancels []func(error)
		for c := range s.clocks {
			if c.waiting == 0 && !c.spent {
				c.spent = true
				cancels = append(cancels, c.cancel)
			}
		}
		err := &BudgetError{Name: "wall", Limit: int64(s.b.Wall)}
		fire = func() {
			for _, cancel := range cancels {
				cancel(err)
			}
		}
	}
	return fire
}

func (s *Spend) check() { s.update(func(time.Time) {}) }

// Pause stops the clock while a person is asked; Resume starts it again.
// They nest; after Stop they do nothing.
func (c *Clock) Pause() {
	c.s.update(func(now time.Time) {
		if c.stopped {
			return
		}
		if c.waiting == 0 {
			c.waitFrom = now
		}
		c.waiting++
	})
}

// Resume starts a paused clock again.
func (c *Clock) Resume() {
	c.s.update(func(now time.Time) {
		if c.stopped {
			return
		}
		if c.waiting--; c.waiting == 0 {
			c.waited += now.Sub(c.waitFrom)
		}
	})
}

// Stop ends the clock: its time is added to the wall spent. It returns
// that time and whether the clock ended the run (its cancel was called).
// Later calls return the same.
func (c *Clock) Stop() (active time.Duration, spent bool) {
	s := c.s
	s.update(func(now time.Time) {
		if !c.stopped {
			c.stopped, c.final = true, c.active(now)
			delete(s.clocks, c)
			s.wall += c.final
		}
		active, spent = c.final, c.spent
	})
	return active, spent
}

// Request counts one request (a tunnel, or a forwarded request) to host
// (normalised, as the proxy gives it), or refuses it: past a request
// budget for the host, or once the network budget is spent.
func (s *Spend) Request(host string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Network > 0 && s.network >= int64(s.b.Network) {
		return &BudgetError{Name: "network", Limit: int64(s.b.Network)}
	}
	for _, rb := range s.hosts {
		if !matchHost(rb.host, host) {
			continue
		}
		if s.requests[rb.entry] >= rb.limit {
			return &BudgetError{Name: "requests[" + rb.entry + "]", Limit: int64(rb.limit)}
		}
		s.requests[rb.entry]++
	}
	return nil
}

// CPUAtLeast raises the CPU time counted to d, what the sandbox counts
// for all its processes: a session's background processes, which no
// command's own count holds once they outlive it, are in it. It returns a
// *BudgetError once the CPU budget is spent.
func (s *Spend) CPUAtLeast(d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cpu = max(s.cpu, d)
	if s.b.CPU > 0 && s.cpu >= time.Duration(s.b.CPU) {
		return &BudgetError{Name: "cpu", Limit: int64(s.b.CPU)}
	}
	return nil
}

// NetworkBytes adds the bytes a connection moved, both ways.
func (s *Spend) NetworkBytes(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.network += n
}

// CountsRequests reports whether Request has anything to count.
func (s *Spend) CountsRequests() bool { return s.b.Network > 0 || len(s.hosts) > 0 }

// matchHost matches a normalised host against a host entry.
func matchHost(h netrule.Host, name string) bool {
	if !h.Wildcard {
		return name == h.Domain
	}
	d := h.Domain
	return len(name) > len(d) && name[len(name)-len(d):] == d && name[len(name)-len(d)-1] == '.'
}
