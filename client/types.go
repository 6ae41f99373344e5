package client

import (
	"fmt"
	"strings"
	"time"
)

// CreateSessionRequest is the body of POST /v1/sessions.
type CreateSessionRequest struct {
	// Policy is a policy document in TOML or JSON (an object); empty means
	// the default policy.
	// Its workspace.path is ignored: Workspace says where the workspace is.
	Policy string `json:"policy,omitempty"`
	// PolicyFile is the absolute path Policy was read from, when it was
	// read from a file on the daemon's host. The daemon takes it only
	// from its own user: the policy's relative paths (a seccomp profile,
	// a secret's program) are then the file's directory's, as for moat
	// run, and the file and those it names are read-only in the
	// workspace. Other tenants' is ignored.
	PolicyFile string `json:"policy_file,omitempty"`
	// Workspace is a host directory the tenant may use; empty means a new
	// empty directory the daemon removes with the session.
	Workspace string `json:"workspace,omitempty"`
	// WorkspaceMode overrides the policy's workspace.mode (direct,
	// readonly, overlay, copy).
	WorkspaceMode string `json:"workspace_mode,omitempty"`
	// TTL and IdleTimeout are Go durations ("30m"); empty means the
	// daemon's defaults.
	TTL         string `json:"ttl,omitempty"`
	IdleTimeout string `json:"idle_timeout,omitempty"`
	// Template names one of the daemon's templates (moat serve
	// --templates), whose policy the session gets; Policy is then empty.
	Template string `json:"template,omitempty"`
	// Learn runs the session's rules in report-only mode: what they would
	// deny or ask about happens, audited as "learn" (moat policy suggest
	// turns the daemon's audit stream into policy additions).
	Learn bool `json:"learn,omitempty"`
}

// Session is a live session as the API shows it.
type Session struct {
	ID            string `json:"id"`
	Tenant        string `json:"tenant"`
	Workspace     string `json:"workspace"`
	WorkspaceMode string `json:"workspace_mode"`
	// ChangeSet names an overlay or copy session's change set, which
	// outlives the session (moat diff, moat apply).
	ChangeSet   string    `json:"change_set,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	IdleTimeout string    `json:"idle_timeout"`
	LastUsedAt  time.Time `json:"last_used_at"`
	Execs       int       `json:"execs"`
	Running     int       `json:"running"`
}

// SessionEnd is the answer to DELETE /v1/sessions/{id} when the
// session's end has something to say.
type SessionEnd struct {
	// Warnings are what its end warns of: a secret's revoke program that
	// failed (the value it minted may still be valid: revoke it by hand),
	// changes lost.
	Warnings []string `json:"warnings,omitempty"`
}

// ExecRequest is the body of POST /v1/sessions/{id}/exec.
type ExecRequest struct {
	Args []string `json:"args"`
	// Env adds NAME=VALUE entries to the policy's environment.
	Env []string `json:"env,omitempty"`
	// Dir is the working directory, relative to the workspace.
	Dir string `json:"dir,omitempty"`
	// Stdin is the command's standard input: all of it, or for a
	// background command with StdinOpen, its beginning; empty means none.
	Stdin string `json:"stdin,omitempty"`
	// Wall bounds this command's wall time below the policy's (a Go
	// duration); Output bounds its output bytes below the policy's.
	Wall   string `json:"wall,omitempty"`
	Output int64  `json:"output,omitempty"`
	// Background starts the command and answers at once with a Process;
	// its output is kept (bounded) and read with the output endpoint.
	Background bool `json:"background,omitempty"`
	// StdinOpen (background only) keeps the command's standard input open
	// after Stdin, for the stdin endpoint to write (a REPL); it ends when
	// a write closes it or the command ends.
	StdinOpen bool `json:"stdin_open,omitempty"`
	// StderrToStdout makes the command's stderr its stdout, one pipe as a
	// shell's 2>&1 makes it: what it writes to either comes as "stdout",
	// in the order it wrote it (two streams keep no order between them).
	StderrToStdout bool `json:"stderr_to_stdout,omitempty"`
	// Tty gives a foreground command a terminal of Rows by Cols (24 by 80
	// when zero) as its stdin, stdout and stderr; its output is all
	// "stdout". Input and new sizes are sent while it runs as the
	// ExecInput lines of an interactive exec (Client.Interactive).
	Tty  bool   `json:"tty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
}

// Event is one line of an exec's NDJSON stream: output (Stream and Data,
// or DataBase64 when the bytes are not UTF-8), or an Approval the command
// waits for, then, last, Exit or Error.
type Event struct {
	Stream     string `json:"stream,omitempty"` // "stdout" or "stderr"
	Data       string `json:"data,omitempty"`
	DataBase64 []byte `json:"data_base64,omitempty"`
	// Approval is a pending approval an ask of the command made: the
	// command waits until a person answers it (moat approve ID) or its
	// time runs out.
	Approval *Approval   `json:"approval,omitempty"`
	Exit     *ExitReport `json:"exit,omitempty"`
	Error    *Error      `json:"error,omitempty"`
	// KeepAlive marks an event that carries nothing: the daemon sends one
	// when a command has been silent for a while (5 s by default), so
	// that the answer's headers and some bytes reach the client.
	KeepAlive bool `json:"keepalive,omitempty"`
}

// ExitReport is how a command ended: the parts of the run report a client
// may see.
type ExitReport struct {
	// ExitCode is the command's own status, 128+N for signal N, 125 when
	// moat could not run it, 126/127 when the command could not be
	// executed / was not found. With Reason "output" the output was cut
	// even when it is 0 (the command ended on its own as the limit was
	// reached): `moat run` and `moat exec` exit 137 then.
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Reason   string `json:"reason"`
	// SessionEnded, with Reason "killed", is why the session ended under
	// the command: ttl, idle, deleted, shutdown, review.
	SessionEnded string `json:"session_ended,omitempty"`
	// Budget, with Reason "budget", names the [budgets] entry spent.
	Budget      string   `json:"budget,omitempty"`
	LimitsHit   []string `json:"limits_hit"`
	WallSeconds float64  `json:"wall_seconds"`
	CPUSeconds  float64  `json:"cpu_seconds"`
	OutputBytes int64    `json:"output_bytes"`
	Denials     []Denial `json:"denials"`
	Warnings    []string `json:"warnings"`
	// Network, in allow mode, is one line naming what the session's
	// proxy refused, and the allowed destinations it could not reach
	// (with why), while the command ran: "" when there were none. The
	// session's commands share the proxy, so it names what any of them
	// met meanwhile.
	Network string `json:"network,omitempty"`
	Error   string `json:"error,omitempty"`
	Stage   string `json:"stage,omitempty"`
}

// Denial is one kind of refusal the sandbox saw (a system call).
type Denial struct {
	Layer string `json:"layer"`
	What  string `json:"what"`
	Errno string `json:"errno"`
	Count int    `json:"count"`
	Rule  string `json:"rule"`
	Hint  string `json:"hint,omitempty"`
}

// Process is a background command of a session.
type Process struct {
	ID        string      `json:"id"`
	Args      []string    `json:"args"`
	StartedAt time.Time   `json:"started_at"`
	Running   bool        `json:"running"`
	Exit      *ExitReport `json:"exit,omitempty"`
}

// Output is what GET .../processes/{pid}/output returns: the chunks kept
// after sequence number After, in order.
type Output struct {
	Chunks []Chunk `json:"chunks"`
	// Next is the After of the following read.
	Next int64 `json:"next"`
	// Dropped counts chunks older than the buffer kept, skipped.
	Dropped int64       `json:"dropped"`
	Running bool        `json:"running"`
	Exit    *ExitReport `json:"exit,omitempty"`
}

// Chunk is one write of a background process.
type Chunk struct {
	Seq        int64  `json:"seq"`
	Stream     string `json:"stream"`
	Data       string `json:"data,omitempty"`
	DataBase64 []byte `json:"data_base64,omitempty"`
}

// SignalRequest is the body of POST .../processes/{pid}/signal.
type SignalRequest struct {
	Signal string `json:"signal"` // "TERM", "KILL", "INT", "HUP"…
}

// Error is every error the API returns, as {"error": {...}}: a stable
// Code to branch on and a Message safe to show. Details lists the policy's
// FILE:LINE: FIELD: MSG errors for invalid_policy.
type Error struct {
	Status  int      `json:"-"`
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Details []string `json:"details,omitempty"`
}

func (e *Error) Error() string {
	if len(e.Details) > 0 {
		return fmt.Sprintf("%s: %s", e.Message, strings.Join(e.Details, "; "))
	}
	return e.Message
}

// The stable error codes.
const (
	CodeBadRequest     = "bad_request"
	CodeBodyTooLarge   = "body_too_large"
	CodeInvalidPolicy  = "invalid_policy"
	CodeNotFound       = "not_found"
	CodeEnded          = "session_ended"
	CodeQuota          = "quota_exceeded"
	CodeWorkspace      = "workspace_refused"
	CodePolicyRefused  = "policy_refused"
	CodeUnauthorized   = "unauthorized"
	CodeOriginRefused  = "origin_refused"
	CodeDraining       = "draining"
	CodeInternal       = "internal"
	CodeNotRunning     = "not_running"
	CodeUnsupported    = "unsupported"
	CodeMethod         = "method_not_allowed"
	CodeSandboxRefused = "sandbox_refused"
	CodeProtected      = "protected_path"
	CodeDenied         = "denied"
	CodeNoStdin        = "stdin_closed"
	CodeStdinBlocked   = "stdin_blocked"
	// CodeApprovalRefused: an approval's answer does not fit the action
	// (a scope, prefix or expiry it cannot have).
	CodeApprovalRefused = "approval_refused"
	// CodeFetchRefused: the fetch was refused (not public HTTPS, a
	// redirect, too slow, too big) or failed; the message says which.
	CodeFetchRefused = "fetch_refused"
	CodeConflict     = "conflict"
	// CodeIncomplete: the session's change set is incomplete (the
	// session ended before its changes were saved into it: the daemon
	// was killed); it can only be discarded.
	CodeIncomplete = "incomplete"
	// CodeForbidden: the credential may not make this request (a token
	// limited to sessions, or to approvals), or the unix socket's caller
	// is in another user namespace than the daemon's (a sandbox's).
	CodeForbidden = "forbidden"
	// CodeBodyTimeout: the request's body went quiet (no byte for the
	// daemon's idle bound) and was abandoned.
	CodeBodyTimeout = "body_timeout"
	// CodeBusy: the daemon has no file descriptor free for the request
	// (503); try again.
	CodeBusy = "busy"
)

// FileInfo describes an entry of a session's workspace.
type FileInfo struct {
	Path string `json:"path"` // relative to the workspace
	// PathBase64 is Path's bytes, given when they are not UTF-8, which
	// JSON's path cannot carry (its invalid bytes become U+FFFD there).
	// Such a path is passed back in a path query parameter as its
	// percent-encoded bytes (url.Values does it).
	PathBase64 []byte    `json:"path_base64,omitempty"`
	Type       string    `json:"type"` // "file", "dir", "symlink" or "other"
	Size       int64     `json:"size"`
	Mode       string    `json:"mode"` // permission bits in octal, "0644"
	ModTime    time.Time `json:"mtime"`
}

// RawPath is the entry's path as its bytes: PathBase64's when given,
// else Path. It is what to pass back to name the entry.
func (f *FileInfo) RawPath() string {
	if f.PathBase64 != nil {
		return string(f.PathBase64)
	}
	return f.Path
}

// ExecInput is a line of an interactive exec's request body, after the
// ExecRequest line: input for the command, its terminal's new size, or
// the end of its input. A line holds one of them.
type ExecInput struct {
	Stdin       string      `json:"stdin,omitempty"`
	StdinBase64 []byte      `json:"stdin_base64,omitempty"`
	CloseStdin  bool        `json:"close_stdin,omitempty"`
	Resize      *WindowSize `json:"resize,omitempty"`
	// Signal is sent to the command's process group: INT, TERM, HUP,
	// QUIT, USR1, USR2, KILL, CONT, STOP or WINCH, with or without SIG.
	Signal string `json:"signal,omitempty"`
}

// WindowSize is a terminal's size in characters.
type WindowSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// ApplyRequest is the body of POST /v1/sessions/{id}/apply.
type ApplyRequest struct {
	// Paths selects the changes at and below them (relative to the
	// workspace); empty means all.
	Paths []string `json:"paths,omitempty"`
	// Force applies the changes at and below these paths even when they
	// touch a protected path or one the host changed.
	Force []string `json:"force,omitempty"`
	// Keep keeps the change set after a full apply (it is discarded).
	Keep bool `json:"keep,omitempty"`
}

// ApplyReport is what an apply did.
type ApplyReport struct {
	Applied []Change `json:"applied"`
	Skipped []Change `json:"skipped"` // special files, never applied
	Forced  []string `json:"forced"`  // host changes overwritten by force
	// ProtectedForced are protected paths (host tools run or read them)
	// that force let through.
	ProtectedForced []string `json:"protected_forced,omitempty"`
	// Recovered says what the apply did first with another change set's
	// apply into the same workspace that was killed part way.
	Recovered []string `json:"recovered,omitempty"`
}

// Change is one change of a change set.
type Change struct {
	Path string `json:"path"`
	// PathBase64 is Path's bytes when they are not UTF-8 (see FileInfo).
	PathBase64 []byte `json:"path_base64,omitempty"`
	Kind       string `json:"kind"` // added, modified, deleted, ...
	Type       string `json:"type"` // file, dir, symlink, special
}

// TarReport is what a tar upload wrote.
type TarReport struct {
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
}

// FetchRequest asks the daemon to fetch a URL for a session.
type FetchRequest struct {
	URL string `json:"url"`
}

// FetchResult is what a fetch got: the status, the headers (one value
// each), the body as text, or in base64 when it is not UTF-8, and the
// address it came from.
type FetchResult struct {
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers"`
	Body       string            `json:"body,omitempty"`
	BodyBase64 string            `json:"body_base64,omitempty"`
	Addr       string            `json:"addr"`
}
