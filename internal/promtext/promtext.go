// Package promtext writes metrics in the Prometheus text exposition
// format (version 0.0.4): counters, gauges and a fixed-bucket histogram,
// nothing else. It does not register, collect or serve anything. Its
// tests read what it writes with Prometheus's own parser
// (github.com/prometheus/common/expfmt), linked into the tests only.
//
// It exists instead of github.com/prometheus/client_golang, which the
// daemon's metrics would otherwise use: every moat process links the
// daemon (the CLI is one binary), and the library's package
// initialisation (24 more package inits: protobuf descriptors, the
// default registry's Go and process collectors) made `moat run --
// /bin/true` 2.0 ms slower at the median, 95% interval [+1.0, +2.8] ms
// (bench/abtime, 400 rounds, with promhttp linked into cmd/moat, on a
// loaded 2-core host).
package promtext

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// ContentType is the HTTP Content-Type of the text format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Counter writes a counter.
func Counter(w io.Writer, name, help string, v int64) {
	header(w, name, help, "counter")
	fmt.Fprintf(w, "%s %d\n", name, v)
}

// Gauge writes a gauge.
func Gauge(w io.Writer, name, help string, v int64) {
	header(w, name, help, "gauge")
	fmt.Fprintf(w, "%s %d\n", name, v)
}

// GaugeVec writes a gauge with one label, a sample per value of the
// label, in the order of the keys given.
func GaugeVec(w io.Writer, name, help, label string, keys []string, v map[string]int64) {
	header(w, name, help, "gauge")
	for _, k := range keys {
		fmt.Fprintf(w, "%s{%s=\"%s\"} %d\n", name, label, escape(k, true), v[k])
	}
}

// header writes the HELP and TYPE lines of a family.
func header(w io.Writer, name, help, typ string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, escape(help, false), name, typ)
}

// escape returns s as the text format spells a HELP text or, with quote,
// a label value. The format knows only the escapes \\, \n and (in label
// values) \"; any other byte stands for itself, so Go's quoting (\t,
// \xff) would be refused. The format is UTF-8: an invalid byte becomes
// U+FFFD, as a Prometheus server refuses a label value that is not UTF-8.
func escape(s string, quote bool) string {
	if !strings.ContainsAny(s, "\\\n\"") && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, string(utf8.RuneError)) {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '"' && quote:
			b.WriteString(`\"`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Histogram counts observations in buckets with the upper bounds it was
// made with. Its methods may be called concurrently.
type Histogram struct {
	bounds []float64

	mu     sync.Mutex
	counts []int64 // per bucket, the last one +Inf
	sum    float64
	n      int64
}

// NewHistogram returns a histogram with the given ascending upper bounds.
func NewHistogram(bounds ...float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]int64, len(bounds)+1)}
}

// Observe counts v.
func (h *Histogram) Observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.n++
	h.mu.Unlock()
}

// Write writes h as the histogram name: cumulative buckets, sum, count.
func (h *Histogram) Write(w io.Writer, name, help string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	header(w, name, help, "histogram")
	var cum int64
	for i, b := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%s\"} %d\n", name, strconv.FormatFloat(b, 'g', -1, 64), cum)
	}
	cum += h.counts[len(h.bounds)]
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %s\n%s_count %d\n", name, cum, name, strconv.FormatFloat(h.sum, 'g', -1, 64), name, h.n)
}
