package daemon

import (
	"context"
	"encoding/json"
	"sync"
)

// A session's event stream: its audit records (package audit's types:
// the rules' decisions and what came of their asks, network decisions,
// denials, each command's run record, and the sandbox's own at its end)
// in the order they happened, kept in memory, bounded, for its tenant to
// read from the start or follow live (Session.Events). It ends when the
// session does.

// maxEvents bounds the records a session keeps; the oldest go first.
const maxEvents = 10000

// Event is one audit record of a session, as JSON, with its place in the
// stream (from 1).
type Event struct {
	Seq    int64
	Record json.RawMessage
}

type eventLog struct {
	mu     sync.Mutex
	events []Event
	seq    int64
	more   chan struct{} // closed and replaced on every record
	closed bool
}

func newEventLog() *eventLog { return &eventLog{more: make(chan struct{})} }

// add appends an audit record; one that does not encode is dropped.
func (l *eventLog) add(rec any) {
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.seq++
	l.events = append(l.events, Event{Seq: l.seq, Record: b})
	if len(l.events) > maxEvents {
		l.events = l.events[len(l.events)-maxEvents:]
	}
	close(l.more)
	l.more = make(chan struct{})
}

// close ends the stream: followers get what is left, then the end.
func (l *eventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.more)
	}
}

// read returns the records after seq after; with follow, it waits for
// one when there are none yet, until the stream ends or ctx is done.
// ended says that no record will follow the ones returned.
func (l *eventLog) read(ctx context.Context, after int64, follow bool) (events []Event, dropped int64, ended bool) {
	for {
		l.mu.Lock()
		after = min(after, l.seq) // past the latest: see buffer.read
		if len(l.events) > 0 && l.events[0].Seq > after+1 {
			dropped = l.events[0].Seq - after - 1
		}
		for _, e := range l.events {
			if e.Seq > after {
				events = append(events, e)
			}
		}
		ended, more := l.closed, l.more
		l.mu.Unlock()
		if len(events) > 0 || ended || !follow {
			return events, dropped, ended
		}
		select {
		case <-more:
		case <-ctx.Done():
			return nil, 0, false
		}
	}
}

// Events returns s's audit records after sequence number after (0: from
// the start), and how many older ones were no longer kept. With follow,
// it waits until there is one, the session ends (ended) or ctx is done.
func (s *Session) Events(ctx context.Context, after int64, follow bool) (events []Event, dropped int64, ended bool) {
	return s.events.read(ctx, after, follow)
}
