// Command cgroupcmp measures moat's hand-written internal/cgroup against
// github.com/opencontainers/cgroups (its fs manager for v1 and hybrid
// hosts) doing what one moat run with limits does: make the run's cgroup
// beneath the caller's own with a memory, pids and CPU limit, put a
// process in it, read its counters, kill what is left in it, remove it.
// The internal/cgroup doc cites its numbers.
//
// It is a module of its own so that moat's go.mod does not carry the
// library it compares with; a build tag picks the one implementation
// each binary links, so the two binaries also show the size of each:
//
//	cd bench/cgroupcmp
//	CGO_ENABLED=0 go build -tags hand -o /tmp/cg-hand .
//	CGO_ENABLED=0 go build -tags oc -o /tmp/cg-oc .
//	/tmp/cg-hand -n 300; /tmp/cg-oc -n 300   # as root; alternate them
//
// Each prints the median and the quartiles of one run's cgroup work (the
// time from before creating the cgroup to after removing it, without the
// process's own start and exit), and the cgroups the process was in, one
// line of /proc/PID/cgroup per hierarchy.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// impl is one implementation: start makes the cgroup id with the limits
// and puts pid in it, returning what must be done afterwards (read the
// counters, kill, remove).
type impl interface {
	name() string
	start(id string, pid int) (finish func() error, err error)
}

func main() {
	n := flag.Int("n", 200, "runs")
	flag.Parse()
	var times []time.Duration
	var dirs []string
	for i := range *n {
		// A process that waits for its stdin to close: in the cgroup
		// while the counters are read, gone before the removal.
		cmd := exec.Command("/bin/cat")
		in, err := cmd.StdinPipe()
		if err != nil {
			fail(err)
		}
		if err := cmd.Start(); err != nil {
			fail(err)
		}
		t0 := time.Now()
		id := fmt.Sprintf("cgroupcmp-%d-%d", os.Getpid(), i)
		finish, err := the.start(id, cmd.Process.Pid)
		if err != nil {
			cmd.Process.Kill()
			fail(err)
		}
		setup := time.Since(t0)
		dirs = dirs[:0]
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, id) {
				dirs = append(dirs, line)
			}
		}
		in.Close()
		cmd.Wait()
		t1 := time.Now()
		if err := finish(); err != nil {
			fail(err)
		}
		times = append(times, setup+time.Since(t1))
	}
	slices.Sort(times)
	q := func(f float64) float64 { return float64(times[int(f*float64(len(times)-1))].Microseconds()) / 1000 }
	fmt.Printf("%s: %d runs, median %.3f ms [quartiles %.3f, %.3f]; %d directories per run:\n", the.name(), *n, q(0.5), q(0.25), q(0.75), len(dirs))
	for _, d := range dirs {
		fmt.Println("  ", d)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "cgroupcmp:", err)
	os.Exit(1)
}
