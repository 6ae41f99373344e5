package promtext

import (
	"strings"
	"testing"
)

func TestHistogram(t *testing.T) {
	h := NewHistogram(0.001, 0.01, 1)
	for _, v := range []float64{0.0005, 0.001, 0.005, 2} {
		h.Observe(v)
	}
	var b strings.Builder
	h.Write(&b, "x_seconds", "X.")
	want := `# HELP x_seconds X.
# TYPE x_seconds histogram
x_seconds_bucket{le="0.001"} 2
x_seconds_bucket{le="0.01"} 3
x_seconds_bucket{le="1"} 3
x_seconds_bucket{le="+Inf"} 4
x_seconds_sum 2.0065
x_seconds_count 4
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	Counter(&b, "c_total", "C.", 3)
	Gauge(&b, "g", "G.", 1)
	if b.String() != "# HELP c_total C.\n# TYPE c_total counter\nc_total 3\n# HELP g G.\n# TYPE g gauge\ng 1\n" {
		t.Errorf("counter and gauge: %q", b.String())
	}
}
