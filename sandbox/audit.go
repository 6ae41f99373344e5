package sandbox

import (
	"sync"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/egress"
)

// NetworkRecord is the audit record of one decision of the egress proxy
// (what Request.Audit receives).
func NetworkRecord(e egress.Event) audit.NetworkRecord {
	return audit.NetworkRecord{
		Type: audit.TypeNetwork, Time: e.Time, RunID: e.RunID, Proto: e.Proto, Host: e.Host, Port: e.Port,
		Addr: e.Addr, SNI: e.SNI, Decision: e.Decision, Rule: e.Rule, Reason: e.Reason,
		BytesUp: e.BytesUp, BytesDown: e.BytesDown, Duration: int64(e.Duration),
		Method: e.Method, Path: e.Path, Secrets: e.Secrets,
	}
}

// A run's audit stream is bounded as a daemon session's is
// (audit.Limiter): by default RunAuditBurst records at once, then
// RunAuditRate a second (moat run's --audit-burst and --audit-rate). A
// run is one person's, so its bound is a daemon's for all its sessions
// together; a --learn run of a long build, one decision for each program
// it starts, may need more.
const (
	RunAuditRate  = 100
	RunAuditBurst = 10000
)

// RunAudit writes one run's records to its stream at a bounded rate:
// what may be dropped (AuditMayDrop, but for the denial records of its
// end) is counted beyond it, in an audit.Dropped record naming the run; a
// decision of the rules, and the action that made it, wait.
type RunAudit struct {
	lim   audit.Limiter
	mu    sync.Mutex
	runID string
}

// NewRunAudit returns a RunAudit writing through write, rate records a
// second once burst are written (RunAuditRate and RunAuditBurst are the
// defaults of moat run).
func NewRunAudit(write func(rec any), rate float64, burst int) *RunAudit {
	a := &RunAudit{}
	a.lim = audit.Limiter{Rate: rate, Burst: burst,
		Write: write,
		WriteDropped: func(d audit.Dropped) {
			a.mu.Lock()
			d.RunID = a.runID
			a.mu.Unlock()
			write(d)
		}}
	return a
}

// Write writes rec, a record of the run's stream, unless the run is over
// its rate and rec may be dropped.
func (a *RunAudit) Write(rec any) {
	var id string
	switch r := rec.(type) {
	case audit.Decision:
		id = r.RunID
	case audit.NetworkRecord:
		id = r.RunID
	case audit.DenialRecord:
		id = r.RunID
	case audit.RunRecord:
		id = r.RunID
	}
	if id != "" {
		a.mu.Lock()
		a.runID = id
		a.mu.Unlock()
	}
	// A run's denial records are its summary at its end, one for each
	// kind: kept, unlike a session's, whose commands come without end.
	_, denial := rec.(audit.DenialRecord)
	a.lim.Add(rec, audit.Kind(rec), denial || !AuditMayDrop(rec))
}

// Close writes the count of what was dropped, if anything was.
func (a *RunAudit) Close() { a.lim.Finish(nil) }

// AuditMayDrop says whether rec, a record of a run's or a session's
// stream, may be dropped when the stream is over its rate
// (audit.Limiter): a network or denial record, or a decision that
// Request.Learn let through; never a decision of the rules nor a run's end.
func AuditMayDrop(rec any) bool {
	switch r := rec.(type) {
	case audit.Decision:
		return r.Outcome == OutcomeLearn
	case audit.RunRecord:
		return false
	}
	return true
}

// AuditRecords are the audit records of a run's end, in the order they
// are written: an audit.DenialRecord per refused system call, then the
// audit.RunRecord. runErr is the error Run returned with r. (The run's
// network records are written as they happen, through Request.Audit, and
// its decision record through Request.AuditDecision.)
func (r *Report) AuditRecords(runErr error) []any {
	now := time.Now().UTC()
	recs := make([]any, 0, len(r.Denials)+1)
	for _, d := range r.Denials {
		recs = append(recs, audit.DenialRecord{
			Type: audit.TypeDenial, Time: now, RunID: r.RunID, Layer: d.Layer, What: d.What, Errno: d.Errno,
			Count: d.Count, Rule: d.Rule, Profile: d.Profile, Hint: d.Hint, Fallback: d.Fallback,
		})
	}
	rec := audit.RunRecord{
		Type: audit.TypeRun, Time: now, RunID: r.RunID, Command: r.Command, Policy: "built-in",
		Reason: r.Reason, Budget: r.Budget, ExitCode: r.ExitCode, LimitsHit: r.LimitsHit, Backend: r.Backend, Seccomp: r.Seccomp,
		LandlockABI: r.LandlockABI, Warnings: r.Warnings, Degraded: r.Degraded,
		ProtectedCreated: r.ProtectedCreated,
	}
	if cs := r.ChangeSet; cs != nil {
		rec.ChangeSet = &audit.ChangeSet{ID: cs.ID, Session: cs.Session, Dir: cs.Dir}
	}
	for _, q := range r.Quarantined {
		rec.Quarantined = append(rec.Quarantined, audit.Quarantined{Path: q.Path, To: q.To, Why: q.Why})
	}
	if r.Policy != nil {
		rec.Workspace, rec.Network = r.Policy.Workspace.Path, r.Policy.Network.Mode
		if r.Policy.Source != "" {
			rec.Policy = r.Policy.Source
		}
	}
	if runErr != nil {
		rec.Error = runErr.Error()
	}
	return append(recs, rec)
}
