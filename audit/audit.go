// Package audit writes moat's audit stream: one JSON object per line,
// appended to a file and never rewritten, so a stream can be tailed while a
// run goes on and a record, once written, stays as it was.
//
// It owns only the file format and the appending; what the records say is
// decided by the packages that produce them (egress events, for now). It
// uses the standard library only and makes no decision.
package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// The kinds of record moat writes. Every record is a JSON object with a
// "type" field naming its kind, so a stream can be filtered line by line.
const (
	// TypeNetwork: one decision of the egress proxy (an egress.Event).
	TypeNetwork = "network"
	// TypeDenial: a system call the sandbox refused, with the rule.
	TypeDenial = "denial"
	// TypeRun: how one run ended (after its network and denial records).
	TypeRun = "run"
)

// Writer appends records to one file. It is safe for concurrent use; each
// record is one write(2) of one line, with O_APPEND, so records from
// several writers (or processes) sharing a file do not interleave.
type Writer struct {
	mu  sync.Mutex
	f   *os.File
	err error
}

// Open opens path for appending, creating it (mode 0600: the stream names
// the hosts a run reached) if needed.
func Open(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit stream: %w", err)
	}
	return &Writer{f: f}, nil
}

// Write appends v as one JSON line. The first error is kept and returned
// by every later Write and by Close.
func (w *Writer) Write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("audit record: %w", err)
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if _, err := w.f.Write(b); err != nil {
		w.err = fmt.Errorf("write audit stream: %w", err)
	}
	return w.err
}

// Close flushes the stream to disk and closes it.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.f.Sync(); err != nil && w.err == nil {
		w.err = fmt.Errorf("sync audit stream: %w", err)
	}
	if err := w.f.Close(); err != nil && w.err == nil {
		w.err = err
	}
	return w.err
}
