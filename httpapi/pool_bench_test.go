//go:build linux

package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/internal/proctest"
)

func reportPercentiles(b *testing.B, times []time.Duration) {
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkCreateCold: a session made on request through the API (an
// empty workspace, the default policy), request to answer; it is
// deleted outside the timing. MOAT_BENCH_SOCKET: against a running moat
// serve (benchClient).
func BenchmarkCreateCold(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		s, err := c.CreateSession(ctx, &client.CreateSessionRequest{})
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
		b.StopTimer()
		c.DeleteSession(ctx, s.ID)
		b.StartTimer()
	}
	b.StopTimer()
	reportPercentiles(b, times)
}

// BenchmarkCreatePool: the same session claimed from a template's warm
// pool; each create waits, outside the timing, for the pool to be full
// again, so that the refill of the last claim does not share the cores
// with this one (BenchmarkCreatePoolRefilling times that).
func BenchmarkCreatePool(b *testing.B) { benchmarkCreatePool(b, 4) }

// BenchmarkCreatePoolRefilling: claims while the pool refills, each
// waiting only for one sandbox in the pool.
func BenchmarkCreatePoolRefilling(b *testing.B) { benchmarkCreatePool(b, 1) }

func benchmarkCreatePool(b *testing.B, waitFor int) {
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "t.toml"), nil, 0o600)
	cfg := daemon.Config{Tick: 5 * time.Millisecond}
	if err := testTemplates(&cfg, dir, "t=4"); err != nil {
		b.Fatal(err)
	}
	d := startDaemon(b, cfg, nil)
	ctx := context.Background()
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for deadline := time.Now().Add(20 * time.Second); d.m.PoolSizes()["t"] < waitFor; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("the pool does not fill")
			}
		}
		b.StartTimer()
		start := time.Now()
		s, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{Template: "t"})
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
		b.StopTimer()
		d.c.DeleteSession(ctx, s.ID)
		b.StartTimer()
	}
	b.StopTimer()
	reportPercentiles(b, times)
}

// BenchmarkIdleSession: the host memory an idle session holds, per
// session, over 20 sessions that each ran one command: its sandbox's
// processes (the init stage and what stays with it; PSS shares the
// pages they share with each other fairly, RSS counts them for each) and
// the daemon's Go heap and goroutine stacks that the sessions keep.
func BenchmarkIdleSession(b *testing.B) { idleSessions(b, "") }

// BenchmarkIdleSessionAllow is BenchmarkIdleSession in allow mode: each
// session has its proxy and its TUN device's network stack in the daemon.
func BenchmarkIdleSessionAllow(b *testing.B) {
	idleSessions(b, "[network]\nmode = \"allow\"\nallow = [\"example.com\"]\n")
}

func idleSessions(b *testing.B, pol string) {
	const n = 20
	d := startDaemon(b, daemon.Config{MaxSessions: n}, nil)
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc + ms.StackInuse
	}
	before := proctest.Children(os.Getpid())
	h0 := heap()
	for range n {
		s, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{Policy: pol})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"true"}}, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	h1 := heap()
	var pss, rss, procs int
	var walk func(pid int)
	walk = func(pid int) {
		procs++
		p, r := smaps(pid)
		pss, rss = pss+p, rss+r
		for _, c := range proctest.Children(pid) {
			walk(c)
		}
	}
	for _, pid := range proctest.Children(os.Getpid()) {
		if !slices.Contains(before, pid) {
			walk(pid)
		}
	}
	for range b.N { // the figures are measured once; b.N does not matter
	}
	b.ReportMetric(float64(pss)/n, "pss-KiB/session")
	b.ReportMetric(float64(rss)/n, "rss-KiB/session")
	b.ReportMetric(float64(procs)/n, "procs/session")
	b.ReportMetric(float64(int64(h1)-int64(h0))/1024/n, "daemon-KiB/session")
}

// smaps returns the PSS and RSS of pid in KiB.
func smaps(pid int) (pss, rss int) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		switch k {
		case "Pss":
			pss = n
		case "Rss":
			rss = n
		}
	}
	return pss, rss
}
