//go:build linux

package httpapi_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// BenchmarkExecTrue: /bin/true in a live session, through the daemon's
// API on its unix socket and the Go client, request to exit report; p50
// and p99 reported beside the mean.
func BenchmarkExecTrue(b *testing.B) {
	d := startDaemon(b, daemon.Config{}, nil)
	s, err := d.c.CreateSession(context.Background(), &client.CreateSessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	req := &client.ExecRequest{Args: []string{"/bin/true"}}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		rep, err := d.c.Exec(context.Background(), s.ID, req, nil, nil)
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
