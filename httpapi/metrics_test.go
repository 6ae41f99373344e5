//go:build linux

package httpapi_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// scrapeMetrics GETs /metrics and reads it as a Prometheus server would:
// the format from the Content-Type, then every family through
// Prometheus's own decoder. It returns the text and the families.
func scrapeMetrics(t *testing.T, sock string) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := rawClient(sock).Get("http://moat/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != string(expfmt.FmtText) {
		t.Errorf("Content-Type %q, want the text format's %q", ct, expfmt.FmtText)
	}
	fams := map[string]*dto.MetricFamily{}
	dec := expfmt.NewDecoder(bytes.NewReader(data), expfmt.ResponseFormat(resp.Header))
	for {
		f := &dto.MetricFamily{}
		if err := dec.Decode(f); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("Prometheus's decoder refuses /metrics: %v\n%s", err, data)
		}
		fams[f.GetName()] = f
	}
	return string(data), fams
}

// TestMetricsParse: after one session ran one command, Prometheus's
// parser reads the whole of /metrics, each family with its type, and the
// figures are those of that session and command.
func TestMetricsParse(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	start := time.Now()
	run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"true"}})
	took := time.Since(start).Seconds()
	text, fams := scrapeMetrics(t, d.sock)

	want := map[string]struct {
		typ dto.MetricType
		v   float64 // the counter or gauge
	}{
		"moat_sessions":               {dto.MetricType_GAUGE, 1},
		"moat_sessions_created_total": {dto.MetricType_COUNTER, 1},
		"moat_execs_total":            {dto.MetricType_COUNTER, 1},
		"moat_denials_total":          {dto.MetricType_COUNTER, 0},
		"moat_exec_seconds":           {dto.MetricType_HISTOGRAM, 0},
	}
	for name, f := range fams {
		w, ok := want[name]
		if !ok {
			// moat_pool_ready is written only by a daemon with pools
			// (TestTemplatesAndPool reads it through scrapeMetrics).
			t.Errorf("unexpected family %s", name)
			continue
		}
		if f.GetType() != w.typ || f.GetHelp() == "" || len(f.GetMetric()) != 1 {
			t.Errorf("%s: type %v, help %q, %d samples; want %v, a help text, 1 sample", name, f.GetType(), f.GetHelp(), len(f.GetMetric()), w.typ)
			continue
		}
		m := f.GetMetric()[0]
		if got := m.GetCounter().GetValue() + m.GetGauge().GetValue(); w.typ != dto.MetricType_HISTOGRAM && got != w.v {
			t.Errorf("%s = %v, want %v", name, got, w.v)
		}
	}
	for name := range want {
		if fams[name] == nil {
			t.Errorf("no family %s", name)
		}
	}
	if t.Failed() {
		t.Fatalf("/metrics:\n%s", text)
	}

	// The one exec took at most as long as the test waited for it, and
	// sits in the first bucket whose bound is at least its time.
	h := fams["moat_exec_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() <= 0 || h.GetSampleSum() > took {
		t.Errorf("exec histogram: count %d, sum %v s; want 1 exec of at most %v s", h.GetSampleCount(), h.GetSampleSum(), took)
	}
	buckets := h.GetBucket()
	if len(buckets) == 0 || !math.IsInf(buckets[len(buckets)-1].GetUpperBound(), 1) {
		t.Fatalf("exec histogram has no +Inf bucket:\n%s", text)
	}
	for i, b := range buckets {
		want := uint64(0)
		if b.GetUpperBound() >= h.GetSampleSum() {
			want = 1
		}
		if b.GetCumulativeCount() != want || (i > 0 && b.GetUpperBound() <= buckets[i-1].GetUpperBound()) {
			t.Errorf("bucket le=%v: %d, want %d, bounds ascending:\n%s", b.GetUpperBound(), b.GetCumulativeCount(), want, text)
		}
	}
}
