package audit

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// The records below are the schema of the stream: their JSON field names
// are what tests and people's own tools read, so a name never changes.

// NetworkRecord is a TypeNetwork record: one decision of the egress
// proxy, with the fields of the proxy's event.
type NetworkRecord struct {
	Type      string    `json:"type"` // TypeNetwork
	Time      time.Time `json:"time"` // when the attempt started
	RunID     string    `json:"run_id,omitempty"`
	Proto     string    `json:"proto"`          // http, connect or socks5
	Host      string    `json:"host,omitempty"` // as the client named it (normalised)
	Port      int       `json:"port,omitempty"` // destination port
	Addr      string    `json:"addr,omitempty"` // the address connected to, "ip:port"
	SNI       string    `json:"sni,omitempty"`  // TLS server name the client sent, if any
	Decision  string    `json:"decision"`       // allow, deny or error
	Rule      string    `json:"rule,omitempty"` // what decided
	Reason    string    `json:"reason,omitempty"`
	BytesUp   int64     `json:"bytes_up"`    // client to destination
	BytesDown int64     `json:"bytes_down"`  // destination to client
	Duration  int64     `json:"duration_ns"` // from the first byte read to the end
	// Method and Path are those of a request read inside a TLS connection
	// the proxy intercepted for a secret's host (proto https-intercepted),
	// and Secrets the names, never the values, of the secrets it added.
	Method  string   `json:"method,omitempty"`
	Path    string   `json:"path,omitempty"`
	Secrets []string `json:"secrets,omitempty"`
	// Session and Tenant name the daemon session the record is of, and
	// its tenant, in a daemon's stream ([Tag]); absent elsewhere.
	Session string `json:"session,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
}

// DenialRecord is a TypeDenial record: a system call the sandbox refused,
// how often, and the rule that refused it.
type DenialRecord struct {
	Type    string    `json:"type"` // TypeDenial
	Time    time.Time `json:"time"`
	RunID   string    `json:"run_id"`
	Layer   string    `json:"layer"`   // "seccomp"
	What    string    `json:"what"`    // the system call
	Errno   string    `json:"errno"`   // what the command got, e.g. "EPERM"
	Count   int       `json:"count"`   // how many times
	Rule    string    `json:"rule"`    // why the profile refuses it
	Profile string    `json:"profile"` // the profile that refused it
	Hint    string    `json:"hint"`    // how to allow it
	// Fallback, when set, says the refusal was expected (a call programs
	// replace with an older one) and what they do instead.
	Fallback string `json:"fallback,omitempty"`
	// Session and Tenant: as in [NetworkRecord].
	Session string `json:"session,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
}

// RunRecord is a TypeRun record: how one run ended. It follows the run's
// network and denial records.
type RunRecord struct {
	Type    string    `json:"type"` // TypeRun
	Time    time.Time `json:"time"`
	RunID   string    `json:"run_id"`
	Command []string  `json:"command"`
	// CommandSHA256: as a [Decision]'s, where Command was cut.
	CommandSHA256 string `json:"command_sha256,omitempty"`
	// Workspace is the workspace's path; Policy the policy file, or
	// "built-in".
	Workspace string `json:"workspace"`
	Policy    string `json:"policy"`
	// Reason is how the run ended ("exit", "timeout", "denied", ...), as
	// the run's report says.
	Reason string `json:"reason"`
	// Budget names the [budgets] entry that ended the run (reason
	// "budget").
	Budget   string `json:"budget,omitempty"`
	ExitCode int    `json:"exit_code"`
	// Error is the error that ended the run, if one did.
	Error     string   `json:"error,omitempty"`
	LimitsHit []string `json:"limits_hit"`
	// Backend is what kept the sandbox: native or gvisor.
	Backend     string   `json:"backend,omitempty"`
	Seccomp     string   `json:"seccomp"`
	LandlockABI int      `json:"landlock_abi"`
	Network     string   `json:"network"` // the network mode
	Warnings    []string `json:"warnings"`
	Degraded    []string `json:"degraded"`
	// ChangeSet is where an overlay or copy run's changes were kept.
	ChangeSet *ChangeSet `json:"change_set,omitempty"`
	// ProtectedCreated lists the protected paths the command created, and
	// Quarantined where each was moved.
	ProtectedCreated []string      `json:"protected_created,omitempty"`
	Quarantined      []Quarantined `json:"quarantined,omitempty"`
	// Session and Tenant: as in [NetworkRecord].
	Session string `json:"session,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
}

// ChangeSet names the change set of a RunRecord.
type ChangeSet struct {
	ID      string `json:"id"`
	Session string `json:"session,omitempty"`
	Dir     string `json:"dir"`
}

// Quarantined is something a run planted where a protected path belongs,
// moved out of the workspace after the run.
type Quarantined struct {
	Path string `json:"path"` // where it was
	To   string `json:"to"`   // where it is now
	Why  string `json:"why"`  // what it was
}

// rawArgs returns args as bytes when one of them is not valid UTF-8, which
// JSON cannot carry (encoding/json writes U+FFFD for each bad byte, so that
// two different command lines would read the same), else nil.
func rawArgs(args []string) [][]byte {
	for _, a := range args {
		if !utf8.ValidString(a) {
			raw := make([][]byte, len(args))
			for i, a := range args {
				raw[i] = []byte(a)
			}
			return raw
		}
	}
	return nil
}

// MarshalJSON adds "command_raw", the command's arguments exactly, each
// in base64, when one is not valid UTF-8.
func (d Decision) MarshalJSON() ([]byte, error) {
	type plain Decision
	return json.Marshal(struct {
		plain
		CommandRaw [][]byte `json:"command_raw,omitempty"`
	}{plain(d), rawArgs(d.Command)})
}

// MarshalJSON adds "command_raw", as [Decision.MarshalJSON] does.
func (r RunRecord) MarshalJSON() ([]byte, error) {
	type plain RunRecord
	return json.Marshal(struct {
		plain
		CommandRaw [][]byte `json:"command_raw,omitempty"`
	}{plain(r), rawArgs(r.Command)})
}

// bounded is r with its command line bounded (BoundArgv), and its error,
// which may quote a command line, to as much.
func (r RunRecord) bounded() RunRecord {
	if c, cut, sum := BoundArgv(r.Command); cut {
		r.Command, r.CommandSHA256 = c, sum
	}
	if e, cut, _ := BoundArgv([]string{r.Error}); cut {
		r.Error = e[0]
	}
	return r
}
