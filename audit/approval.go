package audit

import "time"

// TypeApproval: what came of a pending approval of the daemon.
const TypeApproval = "approval"

// Approval is a TypeApproval record: a pending approval of a daemon
// session (an ask nobody in the request could answer) and what came of
// it. The decision record of the same ask ([Decision], approver "api")
// says what the rules decided; this one says who answered, how and why.
type Approval struct {
	Type    string    `json:"type"` // TypeApproval
	Time    time.Time `json:"time"` // when it was answered, timed out or cancelled
	ID      string    `json:"id"`
	Session string    `json:"session"`
	Tenant  string    `json:"tenant"`
	// Command and Dir are the command asked about; for a network ask,
	// Command is the method ("CONNECT" for a tunnel) and host:port/path.
	Command []string `json:"command"`
	Dir     string   `json:"dir,omitempty"`
	Rule    string   `json:"rule,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	// Outcome is "approved", "denied", "timeout" (nobody answered in
	// time: refused), "cancelled" (the command or session ended first)
	// or "too many pending" (refused at once, without asking: its
	// session or tenant had as many approvals waiting as the daemon
	// allows).
	Outcome string `json:"outcome"`
	// By is who answered: the tenant that did ("uid:1000",
	// "token:NAME"), with the name it gave; Why is the reason it gave.
	By  string `json:"by,omitempty"`
	Why string `json:"why,omitempty"`
	// Scope, Prefix and Expires are the approval given (see
	// harness.Grant).
	Scope   string     `json:"scope,omitempty"`
	Prefix  []string   `json:"prefix,omitempty"`
	Expires *time.Time `json:"expires,omitempty"`
	Created time.Time  `json:"created"`
}
