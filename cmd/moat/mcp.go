package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
	"github.com/moatbox/moat/mcpserver"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/workspace"
)

// cmdMCP is moat mcp: an MCP server on stdin and stdout, over one session
// of its own for the connection (docs/mcp.md). stdout carries the
// protocol; everything moat says goes to stderr.
func cmdMCP(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policyFile := new(string)
	fs.Var(policyFlag{policyFile}, "policy", "policy file (default: the workspace's trusted .moat.toml, else the built-in default)")
	ws := fs.String("workspace", ".", "the workspace directory the session works in")
	mode := fs.String("workspace-mode", "", "direct, readonly, overlay or copy (default: the policy's)")
	approvals := fs.String("approvals-socket", "", "when the client cannot ask its user, keep the rules' asks as pending approvals answered on this unix socket (moat approvals --socket P, moat approve --socket P ID)")
	approvalTimeout := durationFlag(fs, "approval-timeout", 5*time.Minute, "with --approvals-socket: how long an ask waits for an answer")
	allowDegraded := fs.Bool("allow-degraded", false, "run the session without a protection its policy asks for that this host cannot give (a limit without a delegated cgroup), rather than refuse it; each command's report says what it runs without")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: moat mcp [--policy FILE] [--workspace DIR] [--workspace-mode overlay] [--approvals-socket PATH]")
		fs.PrintDefaults()
	}
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "moat mcp: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := emptyFlag(fs, "workspace", "workspace-mode", "approvals-socket"); err != nil {
		fmt.Fprintf(stderr, "moat mcp: %v\n", err)
		return 2
	}
	// The daemon names the policy it was sent "policy": its problems are
	// located in the file they came from.
	policyName := *policyFile
	fail := func(err error) int {
		var pe *policy.Errors
		if policyName != "" && errors.As(err, &pe) {
			for _, fe := range *pe {
				if fe.File == "policy" {
					fe.File = policyName
				}
			}
		}
		fmt.Fprintf(stderr, "moat mcp: %v\n", err)
		return exitMoatError
	}
	var doc []byte
	var err error
	if *policyFile != "" {
		// As moat run reads it: a regular file, bounded (a named pipe
		// would hold the server before it answered its client).
		if doc, err = policy.ReadDocument(*policyFile); err != nil {
			return fail(fmt.Errorf("policy: %w", err))
		}
		if !flagSet(fs, "workspace") {
			*ws = policyWorkspace(*policyFile, doc, *ws)
		}
	}
	dir, err := filepath.Abs(*ws)
	if err != nil {
		return fail(err)
	}
	// The trusted policy as its check read it: the session keeps the
	// digests of the programs it checked.
	var checked *policy.Policy
	switch {
	case *policyFile != "":
	default:
		local := filepath.Join(dir, ".moat.toml")
		if has, lerr := localPolicy(local); lerr != nil {
			return fail(lerr)
		} else if has {
			// The same trust as moat run: a workspace's own policy is used
			// only once a person has reviewed it.
			p, err := loadTrusted(local)
			if err != nil {
				return fail(err)
			}
			policyName, checked = local, p
			// The document that was checked: the file may have changed
			// since.
			if doc, err = p.ReadFile(local); err != nil {
				return fail(fmt.Errorf("policy: %w", err))
			}
		}
	}
	state, err := workspace.StateDir()
	if err != nil {
		return fail(err)
	}
	// The policy's relative paths are its file's directory's, as for
	// moat run, and the file is read-only in the session.
	var policyPath string
	if policyName != "" {
		if policyPath, err = filepath.Abs(policyName); err != nil {
			return fail(err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := mcpserver.LocalConfig{
		StateDir: state, Policy: string(doc), PolicyFile: policyPath, Checked: checked, Workspace: dir, WorkspaceMode: *mode,
		Options: mcpserver.Options{Version: version},
		Logger:  log, AllowDegraded: *allowDegraded,
	}
	if *allowDegraded {
		log.Warn("--allow-degraded: a protection the policy asks for that this host cannot give is dropped; each command's report says what")
	}
	if *approvals != "" {
		cfg.ApprovalTimeout = *approvalTimeout
		if abs, err := filepath.Abs(*approvals); err == nil {
			cfg.Sockets = []string{abs}
		}
		cfg.Approvals = func(m *daemon.Manager) (func(), error) {
			// Only this user reaches the socket (mode 0600), as the
			// session's tenant.
			l, remove, err := listenUnix(*approvals, 0o600, "--approvals-socket")
			if err != nil {
				return nil, fmt.Errorf("--approvals-socket: %w", err)
			}
			hs := (&httpapi.Server{Manager: m, StateDir: state, Logger: log}).HTTPServer()
			go hs.Serve(l)
			return func() { hs.Close(); remove() }, nil
		}
	}
	// The transport answers a line the SDK cannot read (too long, not
	// JSON-RPC), which would otherwise end the session.
	err = mcpserver.ServeLocal(ctx, cfg, mcpserver.NewStdioTransport(stdin, stdout))
	if err != nil {
		return fail(err)
	}
	return 0
}
