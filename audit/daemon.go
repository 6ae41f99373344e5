package audit

import "time"

// The records of a daemon's own (moat serve --audit), around those of its
// sessions.
const (
	// TypeSession: a daemon session began or ended.
	TypeSession = "session"
	// TypeDaemon: a daemon started or stopped.
	TypeDaemon = "daemon"
	// TypeDropped: records of a stream (a daemon's session, a run) not
	// written: it made more than its Limiter allows.
	TypeDropped = "dropped"
)

// SessionEvent is a TypeSession record: a daemon session began ("start")
// or ended ("end"), and why it ended; or a starting daemon finished or
// rolled back an apply of the session's change set that the previous
// daemon's end cut short ("recovered", the outcome in Reason).
type SessionEvent struct {
	Type    string    `json:"type"` // TypeSession
	Time    time.Time `json:"time"`
	Session string    `json:"session"`
	Tenant  string    `json:"tenant"`
	Event   string    `json:"event"` // "start", "end" or "recovered"
	// Reason is why it ended: "deleted" (by its tenant), "ttl", "idle",
	// "sandbox ended" (on its own), "review" (its change set's review
	// ended it), "shutdown" (the daemon stopped), "reaped" (its daemon
	// died with it: the next one cleaned up after it).
	Reason string `json:"reason,omitempty"`
	// Workspace and Mode are the session's workspace and its mode at its
	// start ("" for a workspace the daemon made); Template the template
	// it was made from.
	Workspace string `json:"workspace,omitempty"`
	Mode      string `json:"workspace_mode,omitempty"`
	Template  string `json:"template,omitempty"`
	// Backend, at a start, is what keeps the session's sandbox: native
	// or gvisor.
	Backend string `json:"backend,omitempty"`
	// Created is when a reaped session was made, and PID the pid of the
	// daemon that made it.
	Created *time.Time `json:"created,omitempty"`
	PID     int        `json:"pid,omitempty"`
	// Warnings, for a reaped session, say what the next daemon
	// quarantined of what its commands planted in its workspace, or could
	// not.
	Warnings []string `json:"warnings,omitempty"`
}

// DaemonEvent is a TypeDaemon record: a daemon started ("start") or
// stopped cleanly ("stop").
type DaemonEvent struct {
	Type  string    `json:"type"` // TypeDaemon
	Time  time.Time `json:"time"`
	Event string    `json:"event"` // "start" or "stop"
	PID   int       `json:"pid"`
	// Unclean, at a start, says the previous daemon of the state
	// directory did not stop cleanly (it was killed, or crashed):
	// PreviousPID is its pid when known, and Reaped the sessions it
	// left, each followed by a TypeSession record of its end (reason
	// "reaped").
	Unclean     bool     `json:"unclean,omitempty"`
	PreviousPID int      `json:"previous_pid,omitempty"`
	Reaped      []string `json:"reaped,omitempty"`
}

// Dropped is a TypeDropped record: how many records of a stream (a
// daemon's session, or a run) were not written since Since, by kind
// ("type"), because it made them faster than its [Limiter] writes them,
// or all a daemon's sessions together faster than it writes theirs (Daemon
// of them). It comes before the stream's next record written, or its end.
// Only the kinds that may be dropped are counted: network and denial
// records, and decisions let through by --learn; never another decision.
type Dropped struct {
	Type    string         `json:"type"` // TypeDropped
	Time    time.Time      `json:"time"`
	Session string         `json:"session,omitempty"`
	Tenant  string         `json:"tenant,omitempty"`
	RunID   string         `json:"run_id,omitempty"`
	Count   int            `json:"count"`
	Daemon  int            `json:"daemon,omitempty"`
	Types   map[string]int `json:"types"`
	Since   time.Time      `json:"since"`
}

// Kind returns the kind ("type") of rec, a record of a session's or a
// run's event stream (a [Decision], [NetworkRecord], [DenialRecord] or
// [RunRecord]), or "" for another.
func Kind(rec any) string {
	_, kind := Tag(rec, "", "")
	return kind
}

// Tag returns rec, a record of a session's event stream (a [Decision],
// [NetworkRecord], [DenialRecord] or [RunRecord]), with its session and
// tenant set, and its kind ("type"); a record of another kind comes back
// as it is, and its kind is "".
func Tag(rec any, session, tenant string) (any, string) {
	switch r := rec.(type) {
	case Decision:
		r.Session, r.Tenant = session, tenant
		return r, r.Type
	case NetworkRecord:
		r.Session, r.Tenant = session, tenant
		return r, r.Type
	case DenialRecord:
		r.Session, r.Tenant = session, tenant
		return r, r.Type
	case RunRecord:
		r.Session, r.Tenant = session, tenant
		return r, r.Type
	}
	return rec, ""
}
