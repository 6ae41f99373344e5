// Command abtime compares the run time of two or more commands by
// alternating single runs of each, so that a change in the machine's load
// hits them alike, and reports the median of the paired differences
// against the first command with a bootstrap 95% interval.
//
//	abtime [-n N] [-warmup W] CMD1 [ARGS...] ::: CMD2 [ARGS...] [::: CMD3 ...]
//
// (":::" separates the command lines, which may contain "--" themselves:
// abtime ./a run -- /bin/true ::: ./b run -- /bin/true).
//
// Each round runs CMD1, CMD2, ... once each, in that order (W untimed
// rounds first, default 5; then N timed ones, default 400). A run is timed
// from just before its fork to just after it is reaped, with stdin from
// /dev/null and output discarded; a run that fails stops abtime. It prints
// two lines per command, the wall time and the CPU time (user + system, as
// wait4 reports it for the run and the children it reaped):
//
//	NAME  median MS  mean MS  vs first: DIFF MS [LOW, HIGH]
//	  cpu median MS  mean MS  vs first: DIFF MS [LOW, HIGH]
//
// CPU time says more than wall time on a loaded machine: other work delays
// a run without adding to its CPU time.
//
// This is how differences of a few percent between two builds of moat are
// told apart on a machine whose speed drifts more than that between the
// rounds of bench/startup.sh. Copy the builds with cp just before timing
// them: a binary's start depends on how its pages entered the page cache,
// and two go build outputs written minutes apart can differ by 0.3 ms for
// the same code (see the README's Performance section).
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/moatbox/moat/bench/internal/stats"
)

func main() {
	n := flag.Int("n", 400, "timed rounds")
	warmup := flag.Int("warmup", 5, "untimed rounds first")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: abtime [-n N] [-warmup W] CMD1 [ARGS...] ::: CMD2 [ARGS...] [::: CMD3 ...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	cmds := split(flag.Args())
	if len(cmds) < 2 || *n < 1 || *warmup < 0 {
		flag.Usage()
		os.Exit(2)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		fmt.Fprintln(os.Stderr, "abtime:", err)
		os.Exit(1)
	}
	times := make([][]float64, len(cmds))
	cpu := make([][]float64, len(cmds))
	for round := 0; round < *warmup+*n; round++ {
		for i, argv := range cmds {
			c := exec.Command(argv[0], argv[1:]...)
			c.Stdin = devnull
			start := time.Now()
			if err := c.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "abtime: %s: %v\n", strings.Join(argv, " "), err)
				os.Exit(1)
			}
			if round >= *warmup {
				times[i] = append(times[i], float64(time.Since(start).Nanoseconds())/1e6)
				used := c.ProcessState.UserTime() + c.ProcessState.SystemTime()
				cpu[i] = append(cpu[i], float64(used.Nanoseconds())/1e6)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2)) // fixed: the same data give the same interval
	for i, argv := range cmds {
		fmt.Println(summary(fmt.Sprintf("%-40s", strings.Join(argv, " ")), times, i, rng))
		fmt.Println(summary(fmt.Sprintf("%40s", "cpu"), cpu, i, rng))
	}
}

// summary is the line of command i in times: its median and mean, and
// after the first command the median difference to the first with its
// interval.
func summary(name string, times [][]float64, i int, rng *rand.Rand) string {
	sorted := slices.Clone(times[i])
	slices.Sort(sorted)
	var sum float64
	for _, v := range sorted {
		sum += v
	}
	line := fmt.Sprintf("%s median %7.3f  mean %7.3f", name, stats.Quantile(sorted, 0.5), sum/float64(len(sorted)))
	if i > 0 {
		d := make([]float64, len(times[i]))
		for k := range d {
			d[k] = times[i][k] - times[0][k]
		}
		med, lo, hi := medianInterval(d, rng)
		line += fmt.Sprintf("  vs first: %+.3f [%+.3f, %+.3f]", med, lo, hi)
	}
	return line
}

// split cuts "A a ::: B b" into command lines.
func split(args []string) [][]string {
	var out [][]string
	var cur []string
	for _, a := range args {
		if a == ":::" {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, a)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// medianInterval returns the median of d and the 2.5th and 97.5th
// percentiles of the medians of 2,000 resamples of d (a bootstrap 95%
// interval).
func medianInterval(d []float64, rng *rand.Rand) (med, lo, hi float64) {
	sorted := slices.Clone(d)
	slices.Sort(sorted)
	med = stats.Quantile(sorted, 0.5)
	const resamples = 2000
	meds := make([]float64, resamples)
	s := make([]float64, len(d))
	for r := range meds {
		for k := range s {
			s[k] = d[rng.IntN(len(d))]
		}
		slices.Sort(s)
		meds[r] = stats.Quantile(s, 0.5)
	}
	slices.Sort(meds)
	return med, stats.Quantile(meds, 0.025), stats.Quantile(meds, 0.975)
}
