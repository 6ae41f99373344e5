package daemon

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// The daemon's audit stream (Config.Audit) holds what an auditor needs
// after a crash, when the sessions' in-memory event streams are gone: each
// record of a session's event stream (decisions, network, denials, run
// records), tagged with the session and its tenant (audit.Tag); each
// session's start and end, with why it ended; the daemon's start, saying
// whether the previous daemon stopped cleanly and which of its sessions
// were reaped; and its clean stop.
//
// A session's commands choose how many records they make (a loop of
// refused connections makes one each), and the stream is on the daemon's
// disk: each session's records pass a token bucket (Config.AuditRate,
// AuditBurst), and all sessions' together another (Config.AuditDaemonRate,
// AuditDaemonBurst), so that many sessions cannot fill the disk either.
// What may be dropped (mayDrop: network and denial records, and the
// decisions --learn let through, one for each program or request a
// command makes) is counted, not written, beyond either bucket, the count
// written as an audit.Dropped record before the session's next record
// that passes, or at its end. Once a bucket is empty a dropped record
// costs a lock and a counter, nothing on disk.
//
// A decision of the rules (a deny, an ask and how it ended) and a run's
// end are never dropped: a stream that lost the record of a refused or
// approved action would not be an audit. Beyond its session's bucket such
// a record waits for a token instead (writeKept), and so does the action
// that made it, which goes on only once its record is written: a command
// that makes refused programs without end is slowed to the session's rate
// rather than left unrecorded. They take a token of the daemon's bucket
// too, but do not wait for one: each session's are bounded by its own
// rate, and the daemon's only leaves less room for what may be dropped.
// The records of the daemon's own (session start and end, daemon,
// approvals) pass neither bucket: a session makes two, and approvals are
// bounded (Config.MaxPending).

// sessionAudit sends one session's records to the daemon's stream.
type sessionAudit struct {
	m  *Manager
	id string

	mu      sync.Mutex // held while a record is written: the session's stay in order
	tenant  string
	started bool // its start is written; a pooled sandbox's, once claimed
	tokens  float64
	last    time.Time
	waiting int // records that may not be dropped, waiting for a token
	dropped int
	daemon  int // of dropped, those over the daemon's bucket
	byType  map[string]int
	since   time.Time
}

// bucket is a token bucket: burst tokens, refilled at rate a second.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// take takes a token if there is one; force takes one if there is one
// and says yes anyway.
func (b *bucket) take(now time.Time, rate float64, burst int, force bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(float64(burst), b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens < 1 {
		return force
	}
	b.tokens--
	return true
}

// auditTake takes a token of the daemon's bucket for a session's record.
func (m *Manager) auditTake(now time.Time, force bool) bool {
	return m.audBucket.take(now, m.cfg.AuditDaemonRate, m.cfg.AuditDaemonBurst, force)
}

// mayDrop says whether rec, a record of a session's event stream, may be
// dropped over a rate: not a decision of the rules, unless --learn let
// it through, nor a run's end.
func mayDrop(rec any) bool {
	switch r := rec.(type) {
	case audit.Decision:
		return r.Outcome == sandbox.OutcomeLearn
	case audit.RunRecord:
		return false
	}
	return true
}

func (m *Manager) newSessionAudit(id, tenant string) *sessionAudit {
	return &sessionAudit{m: m, id: id, tenant: tenant, tokens: float64(m.cfg.AuditBurst), last: time.Now()}
}

// setTenant names the tenant of a pooled session once it is claimed.
func (a *sessionAudit) setTenant(t string) {
	a.mu.Lock()
	a.tenant = t
	a.mu.Unlock()
}

// refill adds the tokens of the time since the last record.
func (a *sessionAudit) refill(now time.Time) {
	a.tokens = min(float64(a.m.cfg.AuditBurst), a.tokens+now.Sub(a.last).Seconds()*a.m.cfg.AuditRate)
	a.last = now
}

// write writes rec, one of the session's event stream, unless the
// session or the daemon is over its rate and rec may be dropped.
func (a *sessionAudit) write(rec any) {
	if a.m.cfg.Audit == nil {
		return
	}
	rec, kind := audit.Tag(rec, a.id, "")
	if !mayDrop(rec) {
		a.writeKept(rec)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started {
		// A pooled sandbox nobody claimed runs nothing: what it records
		// (its close) is of no tenant's.
		return
	}
	now := time.Now()
	a.refill(now)
	// The tokens that come while a record that may not be dropped waits
	// are its.
	if own := a.tokens >= 1 && a.waiting == 0; !own || !a.m.auditTake(now, false) {
		if a.dropped == 0 {
			a.since = now
			a.byType = map[string]int{}
		}
		a.dropped++
		if own {
			a.daemon++
		}
		if kind == "" {
			kind = "other"
		}
		a.byType[kind]++
		return
	}
	a.tokens--
	a.flushLocked(now)
	rec, _ = audit.Tag(rec, a.id, a.tenant)
	a.m.auditWrite(rec)
}

// writeKept writes rec, which may not be dropped, once the session has a
// token for it: the caller, and the action it records, wait till then.
func (a *sessionAudit) writeKept(rec any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started {
		return
	}
	now := time.Now()
	for a.refill(now); a.tokens < 1; a.refill(now) {
		wait := time.Duration((1 - a.tokens) / a.m.cfg.AuditRate * float64(time.Second))
		a.waiting++
		a.mu.Unlock()
		time.Sleep(wait)
		a.mu.Lock()
		a.waiting--
		now = time.Now()
	}
	a.tokens--
	a.m.auditTake(now, true)
	a.flushLocked(now)
	rec, _ = audit.Tag(rec, a.id, a.tenant)
	a.m.auditWrite(rec)
}

// flushLocked writes the count of the records dropped, if any. The count
// costs a token too, so that the stream's rate holds.
func (a *sessionAudit) flushLocked(now time.Time) {
	if a.dropped == 0 {
		return
	}
	a.tokens--
	a.m.auditTake(now, true)
	a.m.auditWrite(audit.Dropped{Type: audit.TypeDropped, Time: now.UTC(), Session: a.id, Tenant: a.tenant,
		Count: a.dropped, Daemon: a.daemon, Types: a.byType, Since: a.since.UTC()})
	a.m.log.Warn("audit records of a session dropped: over its rate, or the daemon's", "session", a.id, "tenant", a.tenant,
		"count", a.dropped, "over_daemon_rate", a.daemon)
	a.dropped, a.daemon, a.byType = 0, 0, nil
}

// start writes the session's start.
func (a *sessionAudit) start(s *Session) {
	if a.m.cfg.Audit == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.started = true
	ws := s.Workspace
	if s.TempWorkspace {
		ws = ""
	}
	backend := policy.IsolationNative
	if s.policy != nil && s.policy.Sandbox.Isolation != "" {
		backend = s.policy.Sandbox.Isolation
	}
	a.m.auditWrite(audit.SessionEvent{Type: audit.TypeSession, Time: time.Now().UTC(), Session: a.id, Tenant: a.tenant,
		Event: "start", Workspace: ws, Mode: s.WorkspaceMode, Template: s.template, Backend: backend})
}

// end writes what was dropped, then the session's end and why.
func (a *sessionAudit) end(reason string) {
	if a.m.cfg.Audit == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	a.flushLocked(now)
	a.m.auditWrite(audit.SessionEvent{Type: audit.TypeSession, Time: now.UTC(), Session: a.id, Tenant: a.tenant,
		Event: "end", Reason: reason})
}

// audit sends a record of s where its records go: its event stream and
// the daemon's audit stream.
func (s *Session) audit(rec any) {
	s.events.add(rec)
	s.aud.write(rec)
}

func (s *Session) auditAll(recs []any) {
	for _, r := range recs {
		s.audit(r)
	}
}

// markRunning writes the daemon's pid in the state directory's lock,
// which Shutdown empties (markStopped), and says whether the previous
// daemon left its own there: then it did not stop cleanly.
func (m *Manager) markRunning() (unclean bool, pid int) {
	buf := make([]byte, 32)
	n, _ := m.lock.ReadAt(buf, 0)
	if n > 0 {
		unclean = true
		pid, _ = strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	}
	err := m.lock.Truncate(0)
	if err == nil {
		_, err = m.lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		m.log.Warn("state directory: the daemon's pid in its lock", "err", err)
	}
	return unclean, pid
}

// markStopped empties the lock: the daemon stopped cleanly.
func (m *Manager) markStopped() { m.lock.Truncate(0) }

// auditStart writes the daemon's start, and the end of each session of
// a previous daemon that it reaped.
func (m *Manager) auditStart(unclean bool, prevPID int, reaped []record) {
	if m.cfg.Audit == nil {
		return
	}
	rec := audit.DaemonEvent{Type: audit.TypeDaemon, Time: time.Now().UTC(), Event: "start", PID: os.Getpid(),
		Unclean: unclean || len(reaped) > 0, PreviousPID: prevPID}
	for _, r := range reaped {
		rec.Reaped = append(rec.Reaped, r.ID)
		if rec.PreviousPID == 0 {
			rec.PreviousPID = r.PID
		}
	}
	m.auditWrite(rec)
	for _, r := range reaped {
		created := r.Created.UTC()
		m.auditWrite(audit.SessionEvent{Type: audit.TypeSession, Time: time.Now().UTC(), Session: r.ID, Tenant: r.Tenant,
			Event: "end", Reason: "reaped", Workspace: r.Workspace, Created: &created, PID: r.PID, Warnings: r.warnings})
	}
}

// auditStop writes the daemon's clean stop.
func (m *Manager) auditStop() {
	m.auditWrite(audit.DaemonEvent{Type: audit.TypeDaemon, Time: time.Now().UTC(), Event: "stop", PID: os.Getpid()})
}
