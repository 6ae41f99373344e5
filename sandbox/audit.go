package sandbox

import (
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
