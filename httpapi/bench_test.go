//go:build linux

package httpapi_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// benchClient is the daemon a benchmark talks to: a fresh one in this
// process (its sandboxes' inits are this test binary), or, when
// MOAT_BENCH_SOCKET names a socket, a running `moat serve` there:
// bench/sessions.sh starts one from the binary people install, built as
// the README builds it, so that its rows measure that binary.
func benchClient(b *testing.B) *client.Client {
	b.Helper()
	if sock := os.Getenv("MOAT_BENCH_SOCKET"); sock != "" {
		c := client.Unix(sock)
		b.Cleanup(c.Close)
		return c
	}
	return startDaemon(b, daemon.Config{}, nil).c
}

// BenchmarkExecTrue: /bin/true in a live session, through the daemon's
// API on its unix socket and the Go client, request to exit report; p50
// and p99 reported beside the mean. MOAT_BENCH_SOCKET: against a running
// moat serve (benchClient).
func BenchmarkExecTrue(b *testing.B) { benchExecTrue(b, "") }

// BenchmarkExecTrueNoRules is BenchmarkExecTrue in a session that checks
// no exec (no rules, no built-in set), whose host still hears of each
// setsid (backend/native's sessionkill).
func BenchmarkExecTrueNoRules(b *testing.B) { benchExecTrue(b, "[harness]\nbuiltin = []\n") }

func benchExecTrue(b *testing.B, pol string) {
	c := benchClient(b)
	s, err := c.CreateSession(context.Background(), &client.CreateSessionRequest{Policy: pol})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.DeleteSession(context.Background(), s.ID) })
	req := &client.ExecRequest{Args: []string{"/bin/true"}}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		rep, err := c.Exec(context.Background(), s.ID, req, nil, nil)
		if err != nil || rep.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, rep)
		}
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
}
