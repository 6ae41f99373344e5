package httpapi

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/sandbox"
)

// metrics are the daemon's counters, written in the Prometheus text
// format by hand: the client library registers collectors at package
// initialisation, which every moat process (the CLI links this package)
// would pay for at start-up.
type metrics struct {
	sessionsCreated atomic.Int64
	execs           atomic.Int64
	denials         atomic.Int64

	mu      sync.Mutex
	buckets [len(latencyBounds) + 1]int64
	sum     float64
	count   int64
}

// latencyBounds are the exec latency histogram's upper bounds, in seconds.
var latencyBounds = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60}

func (m *metrics) observeExec(d time.Duration, rep *sandbox.Report) {
	m.execs.Add(1)
	if rep != nil {
		for _, dn := range rep.Denials {
			m.denials.Add(int64(dn.Count))
		}
	}
	sec := d.Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	i := 0
	for i < len(latencyBounds) && sec > latencyBounds[i] {
		i++
	}
	m.buckets[i]++
	m.sum += sec
	m.count++
}

// serveMetrics answers any authenticated tenant: the figures are the
// daemon's, and name no tenant or session.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, _ daemon.Tenant) error {
	m := &s.metrics
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP moat_sessions Live sessions.\n# TYPE moat_sessions gauge\nmoat_sessions %d\n", s.Manager.Count())
	fmt.Fprintf(w, "# HELP moat_sessions_created_total Sessions created.\n# TYPE moat_sessions_created_total counter\nmoat_sessions_created_total %d\n", m.sessionsCreated.Load())
	fmt.Fprintf(w, "# HELP moat_execs_total Commands started in sessions.\n# TYPE moat_execs_total counter\nmoat_execs_total %d\n", m.execs.Load())
	fmt.Fprintf(w, "# HELP moat_denials_total System calls the sandboxes refused.\n# TYPE moat_denials_total counter\nmoat_denials_total %d\n", m.denials.Load())
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintf(w, "# HELP moat_exec_seconds Time of a foreground exec, request to exit.\n# TYPE moat_exec_seconds histogram\n")
	var cum int64
	for i, b := range latencyBounds {
		cum += m.buckets[i]
		fmt.Fprintf(w, "moat_exec_seconds_bucket{le=\"%g\"} %d\n", b, cum)
	}
	cum += m.buckets[len(latencyBounds)]
	fmt.Fprintf(w, "moat_exec_seconds_bucket{le=\"+Inf\"} %d\nmoat_exec_seconds_sum %g\nmoat_exec_seconds_count %d\n", cum, m.sum, m.count)
	return nil
}
