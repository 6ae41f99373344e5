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

// TestEndedOutputBoundedPerSession: the ended background commands of a
// session keep endedOutputBuffers times Config.OutputBuffer of output
// together, the newest first, and a read of an older one's output says
// how much was let go. Each kept its whole bound before, so a command
// that started short noisy background commands without end made the
// daemon hold maxEnded bounds per session. The control: the newest ones
// keep their output whole.
func TestEndedOutputBoundedPerSession(t *testing.T) {
	const buf = 16 << 10
	m := newManager(t, Config{Engine: Sandboxes, OutputBuffer: buf})
	ctx := context.Background()
	tenant := TokenTenant("a")
	s, err := m.Create(ctx, tenant, &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Delete(ctx, tenant, s.ID)
	const n = endedOutputBuffers + 3
	var procs []*Process
	for range n {
		// Four writes of a quarter of the bound: the bound, about.
		p, err := s.Start(&ExecRequest{Args: []string{"python3", "-c", "import os\nfor i in range(4):\n    os.write(1, b'x' * 4000)"}}, false)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
		case <-time.After(60 * time.Second):
			t.Fatal("the background command did not end")
		}
		procs = append(procs, p)
	}
	kept := func(p *Process) (bytes int, dropped int64) {
		out, _, dropped := p.Read(ctx, 0, 0)
		for _, c := range out {
			bytes += len(c.Data)
		}
		return bytes, dropped
	}
	total := 0
	for i, p := range procs {
		b, dropped := kept(p)
		total += b
		if i >= n-endedOutputBuffers+1 && (b != 16000 || dropped != 0) {
			t.Errorf("control: command %d of %d, among the newest, kept %d bytes (%d chunks dropped), want all 16000", i+1, n, b, dropped)
		}
		if i == 0 && (b != 0 || dropped == 0) {
			t.Errorf("the oldest command kept %d bytes, %d chunks said dropped: want none kept, and the drop said", b, dropped)
		}
	}
	if total > endedOutputBuffers*buf {
		t.Errorf("the ended commands keep %d bytes together, want at most %d", total, endedOutputBuffers*buf)
	}
}
