package daemon

import (
	"context"
	"io"
	"sync"
	"time"
)

// Chunk is one write of a background command.
type Chunk struct {
	Seq    int64
	Stream string
	Data   []byte
}

// buffer keeps the latest output of a background command up to a number
// of bytes, each chunk counted with its overhead (chunkOverhead),
// dropping the oldest chunks first; the latest chunk is always kept.
type buffer struct {
	max int

	mu     sync.Mutex
	chunks []Chunk
	size   int
	seq    int64         // the last chunk's sequence number
	more   chan struct{} // closed and replaced on every write
	closed bool
}

func newBuffer(max int) *buffer { return &buffer{max: max, more: make(chan struct{})} }

type streamWriter struct {
	b      *buffer
	stream string
}

func (b *buffer) writer(stream string) io.Writer { return &streamWriter{b, stream} }

func (w *streamWriter) Write(p []byte) (int, error) {
	b := w.b
	data := p
	if room := max(b.max-chunkOverhead, 1); len(data) > room {
		data = data[len(data)-room:]
	}
	data = append([]byte(nil), data...)
	b.mu.Lock()
	b.seq++
	b.chunks = append(b.chunks, Chunk{Seq: b.seq, Stream: w.stream, Data: data})
	b.size += len(data) + chunkOverhead
	for b.size > b.max && len(b.chunks) > 1 {
		b.size -= len(b.chunks[0].Data) + chunkOverhead
		b.chunks[0] = Chunk{} // the array outlives the slice's start: let the data go
		b.chunks = b.chunks[1:]
	}
	close(b.more)
	b.more = make(chan struct{})
	b.mu.Unlock()
	return len(p), nil
}

func (b *buffer) close() {
	b.mu.Lock()
	b.closed = true
	close(b.more)
	b.more = make(chan struct{})
	b.mu.Unlock()
}

func (b *buffer) read(ctx context.Context, after int64, wait time.Duration) ([]Chunk, int64, int64) {
	// An after past the latest chunk names output that does not exist
	// yet: taken as it is, the chunks made up to it would never be shown.
	b.mu.Lock()
	after = min(after, b.seq)
	b.mu.Unlock()
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		b.mu.Lock()
		if b.seq > after || b.closed || timer == nil {
			var out []Chunk
			// The first chunk kept; past the last one when an ended
			// command's output was let go whole (trim).
			first := b.seq + 1
			if len(b.chunks) > 0 {
				first = b.chunks[0].Seq
			}
			var dropped int64
			if first > after+1 {
				dropped = first - after - 1
			}
			for _, c := range b.chunks {
				if c.Seq > after {
					out = append(out, c)
				}
			}
			next := max(b.seq, after)
			b.mu.Unlock()
			return out, next, dropped
		}
		more := b.more
		b.mu.Unlock()
		select {
		case <-more:
		case <-timer:
			timer = nil
		case <-ctx.Done():
			timer = nil
		}
	}
}

// trim drops b's oldest chunks until it holds at most keep bytes, the
// latest one too if need be (an ended command's output, which the
// session's bound on ended output lets go); it returns what b holds
// after.
func (b *buffer) trim(keep int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.size > keep && len(b.chunks) > 0 {
		b.size -= len(b.chunks[0].Data) + chunkOverhead
		b.chunks[0] = Chunk{}
		b.chunks = b.chunks[1:]
	}
	return b.size
}

// chunkOverhead is what a chunk kept costs besides its bytes: the Chunk
// in the slice (sequence number, stream name, slice header) and the
// rounding of its copy's allocation. Counted in the bound, so that a
// command writing a byte at a time cannot make the daemon keep many times
// the bound in bookkeeping.
const chunkOverhead = 64
