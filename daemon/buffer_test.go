package daemon

import (
	"context"
	"testing"
	"time"
)

// TestReadAfterPastTheEnd: a read after a sequence number past the latest
// chunk is taken as after the latest, so the chunks written later reach
// a client that follows next; the control: an after that exists is kept.
func TestReadAfterPastTheEnd(t *testing.T) {
	b := newBuffer(1 << 20)
	w := b.writer("stdout")
	w.Write([]byte("one"))
	go func() {
		time.Sleep(50 * time.Millisecond)
		w.Write([]byte("late"))
	}()
	out, next, _ := b.read(context.Background(), 50, 5*time.Second)
	if len(out) != 1 || string(out[0].Data) != "late" || next != 2 {
		t.Fatalf("read after 50: %+v next %d, want the late chunk and next 2", out, next)
	}
	if out, next, _ := b.read(context.Background(), 1, 0); len(out) != 1 || next != 2 {
		t.Errorf("control: read after 1: %+v next %d", out, next)
	}
}

// TestEventsAfterPastTheEnd: the same for a session's audit records.
func TestEventsAfterPastTheEnd(t *testing.T) {
	l := newEventLog()
	go func() {
		time.Sleep(50 * time.Millisecond)
		l.add(map[string]string{"k": "v"})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if events, _, _ := l.read(ctx, 50, true); len(events) != 1 || events[0].Seq != 1 {
		t.Fatalf("events after 50: %+v", events)
	}
}
