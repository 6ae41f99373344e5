package policy

import (
	"fmt"
	"sort"
	"time"

	"github.com/moatbox/moat/internal/netrule"
)

// Budgets bound what a run (and, through the daemon, a session) may spend
// in all. Unlike [limits], which bound one run's resources as the kernel
// sees them, a budget is counted by moat as the work goes on, and the
// time a person takes to answer an ask does not count against it. A
// spent budget ends a run with reason "budget" naming it (wall, cpu,
// output), or refuses what would spend more (requests, network). Every
// field is optional; zero means no budget.
type Budgets struct {
	// Runs is how many runs a session may start. moat run is one run.
	// Default 0: no budget.
	Runs int `toml:"runs" json:"runs,omitempty"`
	// Wall is the time the command may run, not counting time spent
	// waiting for a person's answer. Default 0: no budget.
	Wall Duration `toml:"wall" json:"wall,omitempty"`
	// CPU is the CPU time the command may use, counted per process as
	// limits.cpu_time is. Default 0: no budget.
	CPU Duration `toml:"cpu" json:"cpu,omitempty"`
	// Output is how many bytes the command may write to stdout and
	// stderr. Default 0: no budget.
	Output Size `toml:"output" json:"output,omitempty"`
	// Network is how many bytes may cross the egress proxy, both ways;
	// counted as each connection ends, so a new connection is refused
	// once it is spent. Default 0: no budget.
	Network Size `toml:"network" json:"network,omitempty"`
	// Requests bound the requests to a host ("api.openai.com" = 20): each
	// CONNECT tunnel and each forwarded plain-HTTP request counts one; the
	// one past the budget is refused. Keys are hosts in the grammar of
	// [network] entries without a port. Default {}.
	Requests map[string]int `toml:"requests" json:"requests,omitempty"`
}

// Any reports whether b sets any budget.
func (b *Budgets) Any() bool {
	return b.Runs > 0 || b.Wall > 0 || b.CPU > 0 || b.Output > 0 || b.Network > 0 || len(b.Requests) > 0
}

func (p *Policy) validateBudgets(l *errorList) {
	b := &p.Budgets
	for _, f := range []struct {
		key string
		neg bool
	}{{"budgets.runs", b.Runs < 0}, {"budgets.wall", b.Wall < 0}, {"budgets.cpu", b.CPU < 0}, {"budgets.output", b.Output < 0}, {"budgets.network", b.Network < 0}} {
		if f.neg {
			l.add(f.key, "must not be negative")
		}
	}
	// A fraction of a second is kept: a session reads the CPU time it
	// spends every so often; a run's limit from it is in whole seconds
	// (RLIMIT_CPU), rounded up (docs/security.md).
	if b.CPU > maxCPUTime {
		l.add("budgets.cpu", fmt.Sprintf("%v is more than the most moat sets (%v)", time.Duration(b.CPU), time.Duration(maxCPUTime)))
	}
	hosts := make([]string, 0, len(b.Requests))
	for h := range b.Requests {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		key := fmt.Sprintf("budgets.requests.%q", h)
		if b.Requests[h] <= 0 {
			l.add(key, "a request budget is a positive count (leave the host out for none)")
		}
		if hr, err := netrule.ParseHost(h, false); err != nil {
			l.add(key, fmt.Sprintf("%q: %v", h, err))
		} else if hr.Port != 0 {
			l.add(key, fmt.Sprintf("%q: a request budget is per host, without a port", h))
		}
	}
}
