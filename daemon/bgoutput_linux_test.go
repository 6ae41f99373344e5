package daemon

import (
	"context"
	"testing"
	"time"
)

// TestBackgroundOutputBoundCountsChunks: a background command's output is
// kept up to Config.OutputBuffer whether anyone reads it or not, and that
// bound holds the daemon's memory, not only the bytes written: each write
// kept is a chunk whose bookkeeping outweighs a byte many times, so a
// command writing one byte at a time, which nobody reads, made the
// daemon keep tens of bytes per byte allowed. The control: large writes
// are kept by the bytes, not starved by the chunks' bookkeeping.
func TestBackgroundOutputBoundCountsChunks(t *testing.T) {
	const buf = 16 << 10
	m := newManager(t, Config{Engine: Sandboxes, OutputBuffer: buf})
	ctx := context.Background()
	tenant := TokenTenant("a")
	s, err := m.Create(ctx, tenant, &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Delete(ctx, tenant, s.ID)
	kept := func(script string) (chunks, bytes int) {
		t.Helper()
		p, err := s.Start(&ExecRequest{Args: []string{"python3", "-c", script}}, false)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
		case <-time.After(60 * time.Second):
			t.Fatal("the background command did not end")
		}
		out, _, _ := p.Read(ctx, 0, 0)
		for _, c := range out {
			bytes += len(c.Data)
		}
		if len(out) == 0 || out[len(out)-1].Data[len(out[len(out)-1].Data)-1] != 'z' {
			t.Fatalf("the output's last write is not kept: %d chunks", len(out))
		}
		return len(out), bytes
	}
	// Single bytes, spaced so that each is read as a write of its own.
	n, b := kept("import os, time\nfor i in range(3000):\n    os.write(1, b'x'); time.sleep(0.0005)\nos.write(1, b'z')")
	if n > buf/chunkOverhead {
		t.Errorf("one-byte writes: %d chunks (%d bytes) kept under a %d-byte bound: want at most %d", n, b, buf, buf/chunkOverhead)
	}
	// The reader may take several writes at once, a chunk as large as the
	// bound, which the next chunk then pushes out whole: the last write is
	// a large one, so that at least it, a quarter of the bound, is kept.
	n, b = kept("import os\nfor i in range(64):\n    os.write(1, b'x' * 4095 + b'\\n')\nos.write(1, b'x' * 4095 + b'z')")
	if b < buf/4 {
		t.Errorf("control, large writes: %d bytes in %d chunks kept under a %d-byte bound: want a quarter of it at least", b, n, buf)
	}
}
