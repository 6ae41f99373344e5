package mcpserver

import "fmt"

// capture keeps what a tool shows of a command's output: its first max
// bytes and its last max bytes, and the count of all of it. A command's
// output is bounded only by its policy's limits.output, which may be 0
// (none): kept whole, it grew moat's memory (the daemon's, for /mcp) for
// as long as the command wrote.
type capture struct {
	max  int
	head []byte
	ring []byte // the last bytes after head: a ring of max bytes
	end  int    // where the next byte goes in ring
	n    int64  // bytes written in all
}

func newCapture(max int) *capture { return &capture{max: max} }

func (c *capture) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	q := p
	if room := c.max - len(c.head); room > 0 {
		k := min(room, len(q))
		c.head = append(c.head, q[:k]...)
		q = q[k:]
	}
	if len(q) == 0 {
		return len(p), nil
	}
	if c.ring == nil {
		c.ring = make([]byte, c.max)
	}
	if len(q) > c.max {
		q = q[len(q)-c.max:]
	}
	k := copy(c.ring[c.end:], q)
	copy(c.ring, q[k:])
	c.end = (c.end + len(q)) % c.max
	return len(p), nil
}

// Len is the number of bytes written.
func (c *capture) Len() int64 { return c.n }

// tail is the last bytes after head, at most max of them, in order.
func (c *capture) tail() []byte {
	after := c.n - int64(len(c.head))
	if after <= 0 {
		return nil
	}
	if after < int64(c.max) {
		return c.ring[:after]
	}
	return append(append([]byte(nil), c.ring[c.end:]...), c.ring[:c.end]...)
}

// show is truncate's text for the output: whole when it is at most max
// bytes (max no more than the capture's own), else its start and end with
// what was left out counted.
func (c *capture) show(max int) string {
	tail := c.tail()
	if c.n == int64(len(c.head)+len(tail)) {
		t, _ := truncate(append(append([]byte(nil), c.head...), tail...), max)
		return t
	}
	h, t := max*2/5, max*3/5
	return fmt.Sprintf("%s\n[... %d bytes of output left out (%d in all); redirect the output to a file and read_file or search_files it to see more ...]\n%s",
		c.head[:h], c.n-int64(h)-int64(t), c.n, tail[len(tail)-t:])
}
