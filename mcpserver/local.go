package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/policy"
)

// LocalConfig is the session of a server that serves one connection in
// its own process (moat mcp over stdio).
type LocalConfig struct {
	// StateDir is moat's state directory; the session manager keeps its
	// records beneath it, in a directory of this process's own (removed at
	// the end), so that any number of local servers and a daemon coexist.
	StateDir string
	// Policy is the policy's TOML ("" is the default policy); Workspace
	// the host directory; WorkspaceMode overrides the policy's mode.
	Policy, Workspace, WorkspaceMode string
	// PolicyFile is the absolute path Policy was read from, if it was
	// (daemon.CreateRequest.PolicyFile).
	PolicyFile string
	// Checked is the policy as policy.Trust.Load returned it, when Policy
	// is a trusted workspace's policy (daemon.CreateRequest.Checked): the
	// session's secrets and runsc are checked against what it checked.
	Checked *policy.Policy
	Options Options
	Logger  *slog.Logger
	// Approvals, when set, is called with the session's manager before
	// serving, which then keeps the asks the client cannot answer as
	// pending approvals (daemon.Config.Approvals, for ApprovalTimeout)
	// for the caller to serve to a person (moat mcp --approvals-socket);
	// the func it returns is called at the end. Nil: such an ask refuses
	// the command.
	Approvals       func(*daemon.Manager) (stop func(), err error)
	ApprovalTimeout time.Duration
	// Sockets are the unix sockets Approvals serves on: the session is
	// refused if its commands would see one (daemon.Config.Sockets).
	Sockets []string
	// AllowDegraded runs the session without a protection its policy
	// asks for that this host cannot give (daemon.Config.AllowDegraded).
	AllowDegraded bool
}

// ServeLocal makes a session for cfg in-process, checks that a command
// runs in it, serves it on t until the client disconnects or ctx ends,
// then ends the session and removes what it kept. A session that cannot
// be made, or whose first command cannot run (a protection the policy
// asks for that this host cannot apply), is an error before anything is
// served.
func ServeLocal(ctx context.Context, cfg LocalConfig, t mcp.Transport) (err error) {
	base := filepath.Join(cfg.StateDir, "mcp")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	reapAbandoned(base, cfg.Logger)
	dir, err := os.MkdirTemp(base, "session-")
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	defer os.RemoveAll(dir)
	m, err := daemon.New(daemon.Config{StateDir: dir, Logger: cfg.Logger,
		// The connection is the session's life: no expiry cuts it short.
		TTL: 10 * 365 * 24 * time.Hour, MaxTTL: 10 * 365 * 24 * time.Hour, IdleTimeout: 10 * 365 * 24 * time.Hour,
		Approvals: cfg.Approvals != nil, ApprovalTimeout: cfg.ApprovalTimeout, Sockets: cfg.Sockets, AllowDegraded: cfg.AllowDegraded})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if e := m.Shutdown(sctx); e != nil && err == nil {
			err = fmt.Errorf("end the session: %w", e)
		}
	}()
	if cfg.Approvals != nil {
		stop, err := cfg.Approvals(m)
		if err != nil {
			return err
		}
		defer stop()
	}
	tenant := daemon.UIDTenant(os.Geteuid())
	network := &NetworkLog{}
	creq := &daemon.CreateRequest{Policy: cfg.Policy, PolicyFile: cfg.PolicyFile, Checked: cfg.Checked, Workspace: cfg.Workspace, WorkspaceMode: cfg.WorkspaceMode, NetworkEvents: network.Record}
	sess, err := m.Create(ctx, tenant, creq)
	if err != nil {
		return err
	}
	var mu sync.Mutex // guards sess, which Restart replaces
	defer func() {
		// The connection is over: what still runs in the session ends now,
		// not after the drain a daemon gives its clients.
		mu.Lock()
		defer mu.Unlock()
		if sess == nil {
			return
		}
		if e := m.Delete(context.Background(), tenant, sess.ID); e != nil && err == nil {
			err = fmt.Errorf("end the session: %w", e)
		}
	}()
	if err := probe(ctx, sess); err != nil {
		return err
	}
	opts := cfg.Options
	opts.Network = network
	opts.Restart = func(ctx context.Context, between func() error) (*daemon.Session, error) {
		mu.Lock()
		defer mu.Unlock()
		if err := m.Delete(ctx, tenant, sess.ID); err != nil {
			return nil, err
		}
		sess = nil
		berr := between()
		ns, err := m.Create(ctx, tenant, creq)
		if err != nil {
			return nil, fmt.Errorf("start the session again: %w", err)
		}
		sess = ns
		return ns, berr
	}
	srv := New(sess, &opts)
	// The SDK's Run, when ctx ends (SIGTERM to moat mcp), closes the
	// connection and then waits for the tool calls still running: a
	// command would hold the server until it ended by itself. Ending the
	// session first ends those calls.
	served := make(chan struct{})
	defer close(served)
	go func() {
		select {
		case <-ctx.Done():
		case <-served:
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if sess != nil && m.Delete(context.Background(), tenant, sess.ID) == nil {
			sess = nil
		}
	}()
	if err := srv.Run(ctx, t); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// probe runs /bin/true in sess: the policy's protections are checked
// against the host now, so that a run that would be refused fails the
// start with the reason rather than every tool call.
func probe(ctx context.Context, sess *daemon.Session) error {
	var errb bytes.Buffer
	rep, err := sess.Exec(ctx, &daemon.ExecRequest{Args: []string{"/bin/true"}}, backend.Stdio{Stderr: &errb})
	if err != nil {
		return fmt.Errorf("the session cannot run commands: %w", err)
	}
	if rep.ExitCode != 0 {
		return fmt.Errorf("the session cannot run commands: /bin/true ended with %d (%s) %s", rep.ExitCode, rep.Reason, errb.String())
	}
	return nil
}

// abandonedAge is how old a session directory without a lock must be
// before it counts as abandoned: ServeLocal makes the directory, then
// the Manager that locks it, a moment later.
const abandonedAge = time.Minute

// reapAbandoned cleans up the session directories under base of local
// servers that died without ending their session (an MCP client's
// SIGKILL is the usual end of a server it no longer wants): what their
// sessions made is reaped as a restarted daemon reaps it, and the
// directory removed. A live server's directory is locked and stays.
func reapAbandoned(base string, log *slog.Logger) {
	ents, _ := os.ReadDir(base)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "session-") {
			continue
		}
		dir := filepath.Join(base, e.Name())
		reaped, err := daemon.ReapAbandoned(dir, log)
		switch {
		case err == nil:
			if log != nil {
				log.Info("reaped a dead server's session", "dir", dir, "sessions", reaped)
			}
		case errors.Is(err, fs.ErrNotExist):
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > abandonedAge {
				os.RemoveAll(dir)
			}
		case errors.Is(err, daemon.ErrLocked):
		default:
			if log != nil {
				log.Warn("reap a dead server's session", "dir", dir, "err", err)
			}
		}
	}
}
