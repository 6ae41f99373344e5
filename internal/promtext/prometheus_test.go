package promtext_test

import (
	"math"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/moatbox/moat/internal/promtext"
)

// parse reads text as a Prometheus server reading the text format does,
// with the names the format allows without escaping.
func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("Prometheus's parser refuses the output: %v\n%s", err, text)
	}
	return fams
}

// TestPrometheusParses: every kind promtext writes, with help texts and
// label values that need escaping, reads back through Prometheus's own
// parser as exactly what was written.
func TestPrometheusParses(t *testing.T) {
	help := `A backslash \ and \n literally, a "quote", a tab` + "\t, a newline\nand ünïcödé, a bad byte \xfe."
	keys := []string{"plain", `quo"te`, `back\slash`, "new\nline", `\n`, `\"`, "tab\t", "ünïcödé", "", "bad\xffbyte"}
	vec := make(map[string]int64, len(keys))
	for i, k := range keys {
		vec[k] = int64(i) - 3
	}
	h := promtext.NewHistogram(0.001, 0.25, 10)
	obs := []float64{0.0005, 0.001, 0.1, 0.2, 100}
	for _, v := range obs {
		h.Observe(v)
	}
	var b strings.Builder
	promtext.Counter(&b, "t_events_total", help, 7)
	promtext.Gauge(&b, "t_level", help, -3)
	promtext.GaugeVec(&b, "t_ready", help, "template", keys, vec)
	h.Write(&b, "t_seconds", help)
	fams := parse(t, b.String())

	// The text format is UTF-8: a byte that is not comes back as U+FFFD,
	// which a Prometheus server accepts where it would refuse the byte.
	wantHelp := strings.ToValidUTF8(help, "\uFFFD")
	family := func(name string, typ dto.MetricType, samples int) []*dto.Metric {
		t.Helper()
		f := fams[name]
		if f == nil {
			t.Fatalf("no family %s in %v", name, fams)
		}
		if f.GetType() != typ || f.GetHelp() != wantHelp || len(f.GetMetric()) != samples {
			t.Fatalf("family %s: type %v, help %q, %d samples; want %v, %q, %d", name, f.GetType(), f.GetHelp(), len(f.GetMetric()), typ, wantHelp, samples)
		}
		return f.GetMetric()
	}
	if len(fams) != 4 {
		t.Errorf("%d families, want 4", len(fams))
	}
	if m := family("t_events_total", dto.MetricType_COUNTER, 1); m[0].GetCounter().GetValue() != 7 || len(m[0].GetLabel()) != 0 {
		t.Errorf("counter: %v", m[0])
	}
	if m := family("t_level", dto.MetricType_GAUGE, 1); m[0].GetGauge().GetValue() != -3 || len(m[0].GetLabel()) != 0 {
		t.Errorf("gauge: %v", m[0])
	}
	for i, m := range family("t_ready", dto.MetricType_GAUGE, len(keys)) {
		want := strings.ToValidUTF8(keys[i], "\uFFFD")
		l := m.GetLabel()
		if len(l) != 1 || l[0].GetName() != "template" || l[0].GetValue() != want || m.GetGauge().GetValue() != float64(vec[keys[i]]) {
			t.Errorf("sample %d: %v, want template=%q %d", i, m, want, vec[keys[i]])
		}
		if !model.LabelValue(l[0].GetValue()).IsValid() {
			t.Errorf("sample %d: a Prometheus server refuses label value %q", i, l[0].GetValue())
		}
	}
	hist := family("t_seconds", dto.MetricType_HISTOGRAM, 1)[0].GetHistogram()
	var sum float64
	for _, v := range obs {
		sum += v
	}
	if hist.GetSampleCount() != uint64(len(obs)) || hist.GetSampleSum() != sum {
		t.Errorf("histogram count %d sum %v, want %d %v", hist.GetSampleCount(), hist.GetSampleSum(), len(obs), sum)
	}
	wantBuckets := []struct {
		le float64
		n  uint64
	}{{0.001, 2}, {0.25, 4}, {10, 4}, {math.Inf(1), 5}}
	if len(hist.GetBucket()) != len(wantBuckets) {
		t.Fatalf("histogram buckets %v, want %v", hist.GetBucket(), wantBuckets)
	}
	for i, bk := range hist.GetBucket() {
		if bk.GetUpperBound() != wantBuckets[i].le || bk.GetCumulativeCount() != wantBuckets[i].n {
			t.Errorf("bucket %d: le %v count %d, want %v %d", i, bk.GetUpperBound(), bk.GetCumulativeCount(), wantBuckets[i].le, wantBuckets[i].n)
		}
	}
}

// TestContentType: promtext's content type is the one Prometheus's
// client library serves the text format with and its scraper reads as it.
func TestContentType(t *testing.T) {
	if promtext.ContentType != string(expfmt.FmtText) {
		t.Errorf("ContentType %q, Prometheus's text format is %q", promtext.ContentType, expfmt.FmtText)
	}
}
