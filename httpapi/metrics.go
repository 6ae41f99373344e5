package httpapi

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/internal/promtext"
	"github.com/moatbox/moat/sandbox"
)

// metrics are the daemon's counters, written by package promtext (which
// says why not with the Prometheus client library).
type metrics struct {
	sessionsCreated atomic.Int64
	execs           atomic.Int64
	denials         atomic.Int64

	once    sync.Once
	latency *promtext.Histogram
}

func (m *metrics) histogram() *promtext.Histogram {
	m.once.Do(func() {
		m.latency = promtext.NewHistogram(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60)
	})
	return m.latency
}

func (m *metrics) observeExec(d time.Duration, rep *sandbox.Report) {
	m.execs.Add(1)
	if rep != nil {
		if rep.Reason == "denied" { // the policy's rules refused the command
			m.denials.Add(1)
		}
		for _, dn := range rep.Denials {
			m.denials.Add(int64(dn.Count))
		}
	}
	m.histogram().Observe(d.Seconds())
}

// serveMetrics answers any authenticated tenant: the figures are the
// daemon's, and name no tenant or session.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, _ daemon.Tenant) error {
	m := &s.metrics
	w.Header().Set("Content-Type", promtext.ContentType)
	promtext.Gauge(w, "moat_sessions", "Live sessions.", int64(s.Manager.Count()))
	promtext.Counter(w, "moat_sessions_created_total", "Sessions created.", m.sessionsCreated.Load())
	promtext.Counter(w, "moat_execs_total", "Commands started in sessions.", m.execs.Load())
	promtext.Counter(w, "moat_denials_total", "Refusals: commands the rules denied, system calls the sandboxes refused.", m.denials.Load())
	m.histogram().Write(w, "moat_exec_seconds", "Time of a foreground exec, request to exit report.")
	writePoolMetrics(w, s.Manager)
	return nil
}
