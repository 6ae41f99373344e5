package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// The sessions that ended are kept, besides in memory, in a journal in
// the daemon's directory, one JSON line each, so that the next daemon
// (after a clean stop or a crash alike) still answers a question about
// one with how it ended (410) rather than that it never was (404). The
// next daemon reads the latest maxEndedSessions and writes them back as
// the journal's start, so it stays bounded.

const endedLogName = "ended.jsonl"

type endedLine struct {
	ID     string    `json:"id"`
	Tenant string    `json:"tenant"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// appendEnded adds what remember keeps to the journal; under mu. A
// failure costs only the answer's precision after a restart (404 for
// 410), so it is logged, not returned.
func (m *Manager) appendEnded(id string, e endedSession) {
	if m.dir == "" {
		return
	}
	b, err := json.Marshal(endedLine{ID: id, Tenant: e.tenant, Reason: e.reason, At: e.at})
	if err != nil {
		return
	}
	if m.endedLines++; m.endedLines > 2*maxEndedSessions {
		// Bounded while the daemon runs too: rewritten with what it
		// remembers, e among them.
		m.writeEnded()
		return
	}
	f, err := os.OpenFile(filepath.Join(m.dir, endedLogName), os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		m.log.Warn("ended sessions journal", "err", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		m.log.Warn("ended sessions journal", "err", err)
	}
}

// loadEnded remembers the sessions the journal names, the latest
// maxEndedSessions, and rewrites it with just those; before the daemon
// serves.
func (m *Manager) loadEnded() {
	path := filepath.Join(m.dir, endedLogName)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	var lines []endedLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l endedLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.ID != "" {
			lines = append(lines, l)
		}
		if len(lines) > 2*maxEndedSessions {
			lines = append(lines[:0], lines[len(lines)-maxEndedSessions:]...)
		}
	}
	f.Close()
	if len(lines) > maxEndedSessions {
		lines = lines[len(lines)-maxEndedSessions:]
	}
	for _, l := range lines {
		m.remember(l.ID, endedSession{tenant: l.Tenant, reason: l.Reason, at: l.At})
	}
	m.writeEnded()
}

// writeEnded replaces the journal with what the daemon remembers; under
// mu, or before it serves.
func (m *Manager) writeEnded() {
	path := filepath.Join(m.dir, endedLogName)
	var buf bytes.Buffer
	for _, id := range m.endedOrder {
		e := m.ended[id]
		b, _ := json.Marshal(endedLine{ID: id, Tenant: e.tenant, Reason: e.reason, At: e.at})
		buf.Write(append(b, '\n'))
	}
	m.endedLines = len(m.endedOrder)
	tmp := path + ".new"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err == nil {
		if os.Rename(tmp, path) != nil {
			os.Remove(tmp)
		}
	}
}
