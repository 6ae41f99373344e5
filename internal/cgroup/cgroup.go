package cgroup

import (
	"errors"
	"fmt"
	"math"
)

// Limits are the resource limits of one run. The zero value sets none.
type Limits struct {
	// MemoryBytes caps the run's memory; 0 leaves it unset. On v1 it sets
	// memory.limit_in_bytes, and memory.memsw.limit_in_bytes to the same value
	// when swap accounting exists, so that swap does not bypass the limit; on
	// v2 it sets memory.max and memory.swap.max to 0.
	MemoryBytes int64
	// Pids caps the number of tasks (processes and threads) in the run's
	// cgroup (pids.max); 0 leaves it unset.
	Pids int64
	// CPUs is a CPU bandwidth quota in CPUs (0.5 is half of one CPU per
	// period of 100 ms); 0 leaves it unset. v1: cpu.cfs_quota_us and
	// cpu.cfs_period_us; v2: cpu.max. The smallest quota is 0.01.
	CPUs float64
}

// cpuPeriodUsec is the CFS period moat uses for a CPU quota (the kernel's
// default period).
const cpuPeriodUsec = 100000

// cpuQuotaUsec is the quota for l.CPUs per cpuPeriodUsec.
func (l Limits) cpuQuotaUsec() int64 {
	return int64(math.Round(l.CPUs * cpuPeriodUsec))
}

func (l Limits) validate() error {
	switch {
	case l.MemoryBytes < 0:
		return fmt.Errorf("cgroup: negative memory limit %d", l.MemoryBytes)
	case l.Pids < 0:
		return fmt.Errorf("cgroup: negative pids limit %d", l.Pids)
	case l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0):
		return fmt.Errorf("cgroup: invalid cpus limit %g", l.CPUs)
	case l.CPUs > 0 && l.cpuQuotaUsec() < 1000:
		return fmt.Errorf("cgroup: cpus limit %g is below the kernel's minimum quota of 0.01", l.CPUs)
	}
	return nil
}

// Info is what this caller could do with cgroups on this host, for
// `moat doctor` and for refusing a run whose limits cannot be enforced.
type Info struct {
	// Version is "v1", "v2", "hybrid" (v1 controllers and a cgroup2 mount) or
	// "none" when no cgroup hierarchy is mounted.
	Version string
	// Usable says, for "memory", "pids" and "cpu", whether this caller can
	// create a child cgroup with that controller and set its limit.
	Usable map[string]bool
	// Why says why a controller is not usable; it has no entry for usable ones.
	Why map[string]string
	// HowTo says how this caller could get the cgroups it lacks on this
	// host (commands with this host's paths); "" when it lacks none.
	HowTo string
	// Kill says whether a run's cgroup would have a cgroup.kill file, which
	// kills the whole group at once. Without it [Cgroup.Kill] freezes the
	// group (when a freezer is available) and signals each process.
	Kill bool
}

// Stats are the counters of a run's cgroup. A counter the host does not
// provide is 0. On v1, Linux 6.18 counts no failcnt when the memory+swap
// limit is the one hit (as it is with Limits.MemoryBytes, and no swap): rely
// on OOMKills there.
type Stats struct {
	MemoryPeak      int64 // bytes; v1 memory.max_usage_in_bytes, v2 memory.peak
	OOMKills        int64 // processes killed by the OOM killer in the cgroup
	MemoryLimitHits int64 // times usage hit the limit; v1 memory.failcnt + memory.memsw.failcnt, v2 memory.events "max"
	PidsLimitHits   int64 // forks refused by pids.max (pids.events "max")
	CPUUsageNanos   int64 // v1 cpuacct.usage, v2 cpu.stat usage_usec
	MemoryCurrent   int64 // bytes in use now; v1 memory.usage_in_bytes, v2 memory.current
	PidsCurrent     int64 // tasks now; pids.current
}

// ErrNoController means a limit was asked for a controller that no mounted
// hierarchy provides to this caller.
var ErrNoController = errors.New("controller not available")

// LimitError reports a requested limit that could not be applied.
type LimitError struct {
	Controller string // "memory", "pids" or "cpu"
	Path       string // the directory or file that could not be created or written; "" if none
	Err        error
}

func (e *LimitError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("cgroup: cannot apply %s limit: %v", e.Controller, e.Err)
	}
	return fmt.Sprintf("cgroup: cannot apply %s limit: %s: %v", e.Controller, e.Path, e.Err)
}

func (e *LimitError) Unwrap() error { return e.Err }
