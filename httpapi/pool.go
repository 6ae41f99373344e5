package httpapi

import (
	"io"
	"sort"

	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/internal/promtext"
)

// writePoolMetrics writes the sandboxes waiting in each template's warm
// pool; a daemon without pools writes none.
func writePoolMetrics(w io.Writer, m *daemon.Manager) {
	sizes := m.PoolSizes()
	if len(sizes) == 0 {
		return
	}
	names := make([]string, 0, len(sizes))
	v := make(map[string]int64, len(sizes))
	for n, k := range sizes {
		names = append(names, n)
		v[n] = int64(k)
	}
	sort.Strings(names)
	promtext.GaugeVec(w, "moat_pool_ready", "Sandboxes made in advance, waiting in a template's warm pool.", "template", names, v)
}
