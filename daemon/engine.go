package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// Engine is a session's sandbox: it runs the session's commands. Its
// methods may be called concurrently.
type Engine interface {
	// Exec runs one command to its end; cancelling ctx kills it. The
	// Report is never nil when the error is nil.
	Exec(ctx context.Context, req *ExecRequest, stdio backend.Stdio) (*sandbox.Report, error)
	// Close ends every command still running and releases the sandbox.
	Close(ctx context.Context) error
}

// EngineSpec is what a session's sandbox is made from.
type EngineSpec struct {
	ID     string
	Policy *policy.Policy // validated and resolved
	Caller sandbox.Caller
}

// NewEngine makes a session's sandbox.
type NewEngine func(ctx context.Context, spec *EngineSpec) (Engine, error)

// ExecRequest is one command of a session.
type ExecRequest struct {
	Args []string
	Env  []string // NAME=VALUE, over the policy's env.set
	Dir  string   // relative to the workspace; "" is its root
	// Wall and Output bound this command below the policy's limits.
	Wall   time.Duration
	Output int64
}

// OneShot runs every command of a session in a sandbox of its own
// (sandbox.Run) over the session's workspace, with the session's policy:
// files persist across commands, processes end with their command. An
// overlay or copy session accumulates its commands' changes in one change
// set named by the session id.
func OneShot(_ context.Context, spec *EngineSpec) (Engine, error) {
	return &oneShot{spec: spec}, nil
}

type oneShot struct{ spec *EngineSpec }

func (o *oneShot) Exec(ctx context.Context, req *ExecRequest, stdio backend.Stdio) (*sandbox.Report, error) {
	p := *o.spec.Policy
	p.Env.Set = make(map[string]string, len(o.spec.Policy.Env.Set)+len(req.Env))
	for k, v := range o.spec.Policy.Env.Set {
		p.Env.Set[k] = v
	}
	for _, kv := range req.Env {
		k, v, _ := strings.Cut(kv, "=")
		p.Env.Set[k] = v
	}
	if req.Wall > 0 && (p.Limits.Wall == 0 || req.Wall < time.Duration(p.Limits.Wall)) {
		p.Limits.Wall = policy.Duration(req.Wall)
	}
	if req.Output > 0 && (p.Limits.Output == 0 || req.Output < int64(p.Limits.Output)) {
		p.Limits.Output = policy.Size(req.Output)
	}
	caller := o.spec.Caller
	caller.Cwd = filepath.Join(p.Workspace.Path, req.Dir)
	r := &sandbox.Request{Policy: &p, Args: req.Args, Caller: &caller}
	if m := p.Workspace.Mode; m == policy.WorkspaceOverlay || m == policy.WorkspaceCopy {
		r.Session = o.spec.ID
	}
	return sandbox.Run(ctx, r, stdio)
}

func (o *oneShot) Close(context.Context) error { return nil }

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
