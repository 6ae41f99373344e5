package daemon

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// Engine is a session's sandbox: it runs the session's commands. Its
// methods may be called concurrently.
type Engine interface {
	// Exec runs one command to its end; cancelling ctx kills it. The
	// Report is never nil when the error is nil.
	Exec(ctx context.Context, req *ExecRequest, stdio backend.Stdio) (*sandbox.Report, error)
	// Start starts a command that runs until it ends, is signalled, or the
	// engine is closed.
	Start(ctx context.Context, req *ExecRequest, stdio backend.Stdio) (EngineProcess, error)
	// ChangeSet is the id of an overlay or copy session's change set, "" in
	// other modes.
	ChangeSet() string
	// Done is closed when the sandbox has ended on its own (its init died).
	Done() <-chan struct{}
	// Close ends every command still running and releases the sandbox.
	Close(ctx context.Context) (*sandbox.Report, error)
}

// EngineProcess is a command started by Engine.Start.
type EngineProcess interface {
	Wait() (*sandbox.Report, error)
	Signal(os.Signal) error
}

// EngineSpec is what a session's sandbox is made from.
type EngineSpec struct {
	ID     string
	Policy *policy.Policy // validated and resolved
	Caller sandbox.Caller
	// NetworkEvents receives the session's network decisions (see
	// CreateRequest); nil means nobody.
	NetworkEvents func(egress.Event)
	// Approver answers the asks of the session's rules that no request
	// answers (a destination of its proxy); AuditDecision receives each
	// decision a rule made. Nil means nobody.
	Approver      sandbox.Approver
	AuditDecision func(audit.Decision) error
	// Audit, if set, receives the session's audit records as they happen
	// (the rules' decisions and the network's); nil means nobody.
	// AuditErr, if set, says the stream they go to has failed: an action
	// a rule decides is then refused (sandbox.Request.AuditDecision).
	Audit    func(rec any)
	AuditErr func() error
	// Learn runs the session's rules in report-only mode
	// (CreateRequest.Learn).
	Learn bool
	// AllowDegraded is Config.AllowDegraded.
	AllowDegraded bool
	// OnCgroup, if set, is given the directories of the sandbox's cgroup
	// before any of its processes starts (sandbox.SessionRequest.OnCgroup),
	// for the session's record; an error fails the engine.
	OnCgroup func(dirs []string) error
	// OnGuard, if set, is given the state of the session's workspace
	// guards before any of its processes starts
	// (sandbox.SessionRequest.OnGuard), for the session's record; an
	// error fails the engine.
	OnGuard func(state []byte) error
}

// NewEngine makes a session's sandbox.
type NewEngine func(ctx context.Context, spec *EngineSpec) (Engine, error)

// ExecRequest is one command of a session.
type ExecRequest struct {
	Args []string
	Env  []string // NAME=VALUE, over the policy's environment
	Dir  string   // relative to the workspace; "" is its root
	// Wall and Output bound this command instead of the policy's limits,
	// never above them.
	Wall   time.Duration
	Output int64
	// Approver answers the asks of the policy's rules about this command;
	// nil means the daemon's pending approvals (Config.Approvals), or,
	// without them, nobody: an ask then refuses it.
	Approver sandbox.Approver
	// OnPending, when set and the daemon's pending approvals answer this
	// command's asks (Approver nil), is told of each pending approval
	// they make, before it waits: a client can say what it waits for.
	OnPending func(*Approval)
	// StderrToStdout makes the command's stderr its stdout: one pipe, so
	// that its output keeps the order written, all of it to Stdout.
	StderrToStdout bool
	// Tty gives the command a terminal of Rows by Cols (Exec only);
	// Resize, if not nil, carries its new sizes while it runs.
	Tty        bool
	Rows, Cols uint16
	Resize     <-chan WindowSize
	// Signals, if not nil, carries signals for the command's process
	// group while it runs (a client's ^C, forwarded).
	Signals <-chan syscall.Signal
}

// WindowSize is a terminal's size in characters.
type WindowSize struct{ Rows, Cols uint16 }

// Sandboxes makes each session one sandbox that lives as long as it
// (sandbox.Create): its commands share the workspace, /tmp, home, the
// processes left running and the network. An overlay or copy session
// keeps its changes in a change set named by the session id.
func Sandboxes(ctx context.Context, spec *EngineSpec) (Engine, error) {
	req := &sandbox.SessionRequest{Policy: spec.Policy, Caller: &spec.Caller, Audit: spec.NetworkEvents, Learn: spec.Learn,
		Approver: spec.Approver, AuditDecision: spec.AuditDecision, OnCgroup: spec.OnCgroup, OnGuard: spec.OnGuard,
		AllowDegraded: spec.AllowDegraded}
	if rec := spec.Audit; rec != nil {
		hook, decided := spec.NetworkEvents, spec.AuditDecision
		req.Audit = func(e egress.Event) {
			rec(sandbox.NetworkRecord(e))
			if hook != nil {
				hook(e)
			}
		}
		failed := spec.AuditErr
		req.AuditDecision = func(d audit.Decision) error {
			rec(d)
			if decided != nil {
				if err := decided(d); err != nil {
					return err
				}
			}
			if failed != nil {
				return failed()
			}
			return nil
		}
	}
	if m := spec.Policy.Workspace.Mode; m == policy.WorkspaceOverlay || m == policy.WorkspaceCopy {
		req.Session = spec.ID
	}
	s, err := sandbox.Create(ctx, req)
	if err != nil {
		return nil, err
	}
	return &sandboxEngine{s: s, p: spec.Policy}, nil
}

type sandboxEngine struct {
	s *sandbox.Session
	p *policy.Policy
}

// request turns a daemon request into the sandbox's: the directory
// inside the sandbox, the limits never above the policy's.
func (e *sandboxEngine) request(req *ExecRequest) *sandbox.ExecRequest {
	r := &sandbox.ExecRequest{Args: req.Args, Env: req.Env, Approver: req.Approver, Tty: req.Tty, Rows: req.Rows, Cols: req.Cols}
	if req.Dir != "" {
		r.Dir = filepath.Join(e.p.Workspace.Path, req.Dir)
	}
	if w := time.Duration(e.p.Limits.Wall); req.Wall > 0 && (w == 0 || req.Wall < w) {
		r.Wall = req.Wall
	}
	if o := int64(e.p.Limits.Output); req.Output > 0 && (o == 0 || req.Output < o) {
		r.Output = req.Output
	}
	return r
}

func (e *sandboxEngine) Exec(ctx context.Context, req *ExecRequest, stdio backend.Stdio) (*sandbox.Report, error) {
	if req.Resize == nil && req.Signals == nil {
		return e.s.Exec(ctx, e.request(req), stdio)
	}
	return execRelayed(ctx, e.s, e.request(req), stdio, req.Resize, req.Signals)
}

func (e *sandboxEngine) Start(ctx context.Context, req *ExecRequest, stdio backend.Stdio) (EngineProcess, error) {
	return e.s.Start(ctx, e.request(req), stdio)
}

// EndWarnings are the warnings of the sandbox's end (endWarner).
func (e *sandboxEngine) EndWarnings() []string { return e.s.EndWarnings() }

// endWarner is an Engine whose Close report's warnings include those of
// its start: EndWarnings, after Close, are those of its end alone.
type endWarner interface {
	EndWarnings() []string
}

// requestSpender is an Engine whose session's [budgets] count the
// requests the daemon makes for it (Session.Fetch).
type requestSpender interface {
	SpendRequest(host string) error
	SpendNetwork(n int64)
}

func (e *sandboxEngine) SpendRequest(host string) error { return e.s.SpendRequest(host) }

// fetchScrubber is an Engine that keeps secrets out of what the daemon
// fetches for its session (Session.Fetch).
type fetchScrubber interface {
	CheckFetchURL(u *url.URL) error
	ScrubFetched(r *egress.FetchResult) error
	ScrubText(v string) string
}

func (e *sandboxEngine) CheckFetchURL(u *url.URL) error           { return e.s.CheckFetchURL(u) }
func (e *sandboxEngine) ScrubFetched(r *egress.FetchResult) error { return e.s.ScrubFetched(r) }
func (e *sandboxEngine) ScrubText(v string) string                { return e.s.ScrubText(v) }
func (e *sandboxEngine) SpendNetwork(n int64)                     { e.s.SpendNetwork(n) }

func (e *sandboxEngine) ChangeSet() string {
	if cs := e.s.ChangeSet(); cs != nil {
		return cs.ID
	}
	return ""
}

func (e *sandboxEngine) Done() <-chan struct{} { return e.s.Done() }

func (e *sandboxEngine) EndReason() string { return e.s.EndReason() }

// signaller is an Engine that can signal every command it runs (a drain
// asks them to end before the engine is closed).
type signaller interface {
	Signal(os.Signal) int
}

func (e *sandboxEngine) Signal(sig os.Signal) int { return e.s.Signal(sig) }

func (e *sandboxEngine) Close(ctx context.Context) (*sandbox.Report, error) { return e.s.Close(ctx) }

// daemonCaller is who the sandboxes are made by: the daemon, with none of
// its own environment (it is not the tenant's), and its home directory,
// which sandbox refuses as a workspace.
func daemonCaller() sandbox.Caller {
	home, _ := os.UserHomeDir()
	return sandbox.Caller{
		UID: os.Geteuid(), GID: os.Getegid(), Home: home,
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"},
	}
}
