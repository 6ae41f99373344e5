package mcpserver

import (
	"math/rand/v2"
	"testing"
)

// TestCapture: what a tool shows of a command's output kept by capture,
// which holds at most its start and its end, is what truncate makes of
// the whole output, for outputs shorter and far longer than the bound,
// written in pieces of any size; and capture holds a bounded amount.
func TestCapture(t *testing.T) {
	const max = 1000
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 10, max - 1, max, max + 1, 2 * max, 2*max + 7, 3*max + 1, 50*max + 3} {
		full := make([]byte, size)
		for i := range full {
			full[i] = byte('a' + r.IntN(26))
		}
		c := newCapture(max)
		for rest := full; len(rest) > 0; {
			k := min(len(rest), 1+r.IntN(3*max))
			c.Write(rest[:k])
			rest = rest[k:]
		}
		if c.Len() != int64(size) {
			t.Errorf("size %d: Len %d", size, c.Len())
		}
		if held := len(c.head) + len(c.ring); held > 2*max {
			t.Errorf("size %d: holds %d bytes", size, held)
		}
		for _, m := range []int{max, max / 2} {
			want, _ := truncate(full, m)
			if got := c.show(m); got != want {
				t.Errorf("size %d, shown at %d: %d bytes, want %d", size, m, len(got), len(want))
			}
		}
	}
}
