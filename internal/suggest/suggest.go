// Package suggest finds the known name a mistyped one most likely meant,
// for the "did you mean" of policy keys, seccomp profile fields and
// command-line flags. It is pure: no system calls, no allocation beyond
// two rows per comparison.
package suggest

import "strings"

// Closest returns the name of known nearest to name within maxDist edits
// (Levenshtein distance), a name that differs only in case counting as
// the nearest of all; "" when none is that close. Among names equally
// near, the first in known wins.
func Closest(name string, known []string, maxDist int) string {
	best, bestDist := "", maxDist+1
	for _, k := range known {
		d := Distance(name, k)
		if strings.EqualFold(name, k) {
			d = 0
		}
		if d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
