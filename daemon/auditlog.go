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
// A session's commands choose how many records they make, and the stream
// is on the daemon's disk: each session's records pass an audit.Limiter
// (Config.AuditRate, AuditBurst), and all sessions' together a bucket
// they share (Config.AuditDaemonRate, AuditDaemonBurst), so that many
// sessions cannot fill the disk either. What may be dropped
// (sandbox.AuditMayDrop) is counted beyond either, the count written as an
// audit.Dropped record; a decision of the rules and a run's end wait for
// the session's token instead, and the action that made them with them
// (see audit.Limiter). The records of the daemon's own (session start and
// end, daemon, approvals) pass neither bucket: a session makes two, and
// approvals are bounded (Config.MaxPending).

// sessionAudit sends one session's records to the daemon's stream.
type sessionAudit struct {
	m   *Manager
	id  string
	lim *audit.Limiter

	mu      sync.Mutex
	tenant  string
	started bool // its start is written; a pooled sandbox's, once claimed
}

func (m *Manager) newSessionAudit(id, tenant string) *sessionAudit {
	a := &sessionAudit{m: m, id: id, tenant: tenant}
	a.lim = &audit.Limiter{Rate: m.cfg.AuditRate, Burst: m.cfg.AuditBurst,
		Shared: &m.audBucket, SharedRate: m.cfg.AuditDaemonRate, SharedBurst: m.cfg.AuditDaemonBurst,
		Write: m.auditWrite,
		WriteDropped: func(d audit.Dropped) {
			d.Session, d.Tenant = a.id, a.tenantNow()
			m.auditWrite(d)
			m.log.Warn("audit records of a session dropped: over its rate, or the daemon's", "session", d.Session, "tenant", d.Tenant,
				"count", d.Count, "over_daemon_rate", d.Daemon)
		}}
	return a
}

// setTenant names the tenant of a pooled session once it is claimed.
func (a *sessionAudit) setTenant(t string) {
	a.mu.Lock()
	a.tenant = t
	a.mu.Unlock()
}

func (a *sessionAudit) tenantNow() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tenant
}

// write writes rec, one of the session's event stream, unless the
// session or the daemon is over its rate and rec may be dropped; one that
// may not waits for the session's token, and its caller with it.
func (a *sessionAudit) write(rec any) {
	if a.m.cfg.Audit == nil {
		return
	}
	a.mu.Lock()
	started, tenant := a.started, a.tenant
	a.mu.Unlock()
	if !started {
		// A pooled sandbox nobody claimed runs nothing: what it records
		// (its close) is of no tenant's.
		return
	}
	rec, kind := audit.Tag(rec, a.id, tenant)
	a.lim.Add(rec, kind, !sandbox.AuditMayDrop(rec))
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
	a.lim.Finish(audit.SessionEvent{Type: audit.TypeSession, Time: time.Now().UTC(), Session: a.id, Tenant: a.tenantNow(),
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
