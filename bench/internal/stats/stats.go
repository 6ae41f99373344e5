// Package stats summarises the samples the bench programs take, in the
// one format the bench scripts read: "MEDIAN P90 MEAN MIN". It owns
// nothing else.
package stats

import (
	"fmt"
	"slices"
)

// Summary sorts d (milliseconds, at least one) and returns
// "MEDIAN P90 MEAN MIN", each to three decimals.
func Summary(d []float64) string {
	slices.Sort(d)
	var sum float64
	for _, v := range d {
		sum += v
	}
	return fmt.Sprintf("%.3f %.3f %.3f %.3f", Quantile(d, 0.5), Quantile(d, 0.9), sum/float64(len(d)), d[0])
}

// Quantile of sorted data, linearly interpolated.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}
