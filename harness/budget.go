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
	return fmt.Sprintf("the %s budget ([budgets] in the policy) is spent", e.Name)
}

// Spend counts what a session (or one run) has spent against the
// policy's [budgets]. The daemon keeps one per session across its runs;
// moat run makes one for its run. It is safe for concurrent use.
type Spend struct {
	b        policy.Budgets
	hosts    []requestBudget
	mu       sync.Mutex
	runs     int
	wall     time.Duration
	cpu      time.Duration
	output   int64
	network  int64
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
	s := &Spend{b: b, requests: map[string]int{}}
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
	w, err1 := left("wall", int64(s.b.Wall), int64(s.wall))
	c, err2 := left("cpu", int64(s.b.CPU), int64(s.cpu))
	o, err3 := left("output", int64(s.b.Output), s.output)
	for _, e := range []error{err1, err2, err3} {
		if e != nil {
			return 0, 0, 0, e
		}
	}
	return time.Duration(w), time.Duration(c), o, nil
}

// EndRun adds what a run used: wall is its time not spent waiting for a
// person.
func (s *Spend) EndRun(wall, cpu time.Duration, output int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wall += wall
	s.cpu += cpu
	s.output += output
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
// command's own count holds once they outlive it, are in it.
func (s *Spend) CPUAtLeast(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cpu = max(s.cpu, d)
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
