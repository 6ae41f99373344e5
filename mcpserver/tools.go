package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// The tools, in the order tools/list shows them. Their descriptions are
// written for a model: what the tool does, what it refuses, what to do
// next.
var tools = []string{
	"run_command", "start_process", "read_output", "stop_process",
	"read_file", "write_file", "edit_file", "list_files", "search_files",
	"diff", "apply", "fetch", "session_info",
}

type commandIn struct {
	Command        string   `json:"command,omitempty" jsonschema:"a shell command line, run by /bin/sh -c; give this or args"`
	Args           []string `json:"args,omitempty" jsonschema:"the program and its arguments, run as given without a shell; give this or command"`
	Cwd            string   `json:"cwd,omitempty" jsonschema:"directory to run in, relative to the workspace root (default: the root)"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds (default: the policy's wall-clock limit)"`
}

type processIn struct {
	ID          string `json:"id" jsonschema:"the process id start_process returned"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"when there is no new output yet, wait up to this many seconds for some (default 0, at most 60)"`
}

type stopIn struct {
	ID string `json:"id" jsonschema:"the process id start_process returned"`
}

type readIn struct {
	Path   string `json:"path" jsonschema:"file path, relative to the workspace root"`
	Offset int    `json:"offset,omitempty" jsonschema:"first line to return, 1-based (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"number of lines to return (default: all, within the output bound)"`
}

type writeIn struct {
	Path    string `json:"path" jsonschema:"file path, relative to the workspace root; missing directories are made"`
	Content string `json:"content" jsonschema:"the whole new content of the file"`
}

type editIn struct {
	Path       string `json:"path" jsonschema:"file path, relative to the workspace root"`
	OldString  string `json:"old_string" jsonschema:"the exact text to replace, whitespace included; it must occur exactly once unless replace_all is set"`
	NewString  string `json:"new_string" jsonschema:"the text to put in its place"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence instead of exactly one"`
}

type listIn struct {
	Path      string `json:"path,omitempty" jsonschema:"directory, relative to the workspace root (default: the root)"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"list the whole tree beneath it, not only its entries"`
}

type searchIn struct {
	Pattern         string `json:"pattern" jsonschema:"an extended regular expression (grep -E) to look for in file contents"`
	Path            string `json:"path,omitempty" jsonschema:"directory or file to search, relative to the workspace root (default: the root)"`
	Glob            string `json:"glob,omitempty" jsonschema:"only search files whose name matches this glob, such as *.go"`
	IgnoreCase      bool   `json:"ignore_case,omitempty" jsonschema:"match regardless of case"`
	FilesOnly       bool   `json:"files_only,omitempty" jsonschema:"list only the names of the files that match"`
	MaxMatchPerFile int    `json:"max_matches_per_file,omitempty" jsonschema:"stop after this many matching lines per file (default 50)"`
}

type diffIn struct {
	Summary bool `json:"summary,omitempty" jsonschema:"one line per changed path instead of the full unified diff"`
}

type applyIn struct {
	Paths []string `json:"paths,omitempty" jsonschema:"apply only these paths (and what lies beneath them), relative to the workspace root; default: every change"`
}

type noIn struct{}

func (s *server) addTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: "run_command", Description: "Run a command to its end inside the sandbox, in the workspace, and return its exit code, why it ended and its output (stdout and stderr; the middle of long output is left out, with a note). " +
		"The policy decides what the command may read, write and reach; a command its rules refuse or that a person must approve is not run, and the result says which rule. For servers and other long-running commands, use start_process."}, tool(s, s.runCommand))
	mcp.AddTool(srv, &mcp.Tool{Name: "start_process", Description: "Start a command in the background inside the sandbox (a server, a watcher, a long build) and return its process id at once. Read its output with read_output and end it with stop_process; it ends with the session otherwise."}, tool(s, s.startProcess))
	mcp.AddTool(srv, &mcp.Tool{Name: "read_output", Description: "Return the output a background process wrote since the last read_output of it, and whether it still runs (with its exit code once it has ended). Set wait_seconds to wait for output that has not come yet."}, tool(s, s.readOutput))
	mcp.AddTool(srv, &mcp.Tool{Name: "stop_process", Description: "Stop a background process: SIGTERM, then SIGKILL if it has not ended within a few seconds. Returns how it ended and the output not read yet."}, tool(s, s.stopProcess))
	mcp.AddTool(srv, &mcp.Tool{Name: "read_file", Description: "Read a text file of the workspace, with line numbers. Paths are relative to the workspace root; a path leading out of the workspace (.., an absolute path elsewhere, a symbolic link pointing out) is refused. Use offset and limit for large files."}, tool(s, s.readFile))
	mcp.AddTool(srv, &mcp.Tool{Name: "write_file", Description: "Create or replace a file of the workspace with the given content (the directories on the way are made). Paths are relative to the workspace root; a path leading out of it, or a protected path (git hooks and config, host tools' configuration), is refused. Prefer edit_file to change part of a file."}, tool(s, s.writeFile))
	mcp.AddTool(srv, &mcp.Tool{Name: "edit_file", Description: "Replace an exact string in a workspace file with another. old_string must occur exactly once (give more surrounding lines to make it unique) unless replace_all is set; when it is absent or not unique nothing is changed and the result says so."}, tool(s, s.editFile))
	mcp.AddTool(srv, &mcp.Tool{Name: "list_files", Description: "List a workspace directory: one entry per line with its type (file, dir, symlink) and size; set recursive for the whole tree beneath it."}, tool(s, s.listFiles))
	mcp.AddTool(srv, &mcp.Tool{Name: "search_files", Description: "Search the contents of the workspace's files for a regular expression (grep -E, binary files skipped) and return the matching lines as path:line:text."}, tool(s, s.searchFiles))
	mcp.AddTool(srv, &mcp.Tool{Name: "diff", Description: "In an overlay session, show what the session's commands and writes changed, as a unified diff against the real workspace: nothing reaches the real workspace until apply."}, tool(s, s.diff))
	mcp.AddTool(srv, &mcp.Tool{Name: "apply", Description: "In an overlay session, write the session's changes (all, or the paths given) into the real workspace. A person is asked first; the result says whether they approved, what was applied and what was refused (conflicts with edits made meanwhile, protected paths). The sandbox restarts over the applied workspace: stop background processes first, and expect /tmp to start empty."}, tool(s, s.apply))
	mcp.AddTool(srv, &mcp.Tool{Name: "fetch", Description: "Fetch a public https:// URL with a GET and return the status and the body (text only), made by moat outside the sandbox, as a webhook would be: no redirects followed, 5 seconds, at most 1 MiB, public addresses only, and the policy's host rules apply. Use it to read a page or an API's answer when the session has no network; it sends no credentials."}, tool(s, s.fetch))
	mcp.AddTool(srv, &mcp.Tool{Name: "session_info", Description: "Describe the sandbox session: the workspace and its mode, what commands may write, which hosts they may reach, the limits and the rules that refuse or ask about commands. Call it before planning work that writes files or uses the network."}, tool(s, s.sessionInfo))
}

// execReq turns a command input into a session exec request, or into the
// question to the user its rules ask first.
func (s *server) execReq(req *mcp.CallToolRequest, in *commandIn) (*daemon.ExecRequest, *mcp.CallToolResult) {
	er, err := s.parseCommand(in)
	if err != nil {
		return nil, errorResult(err.Error())
	}
	a, d := s.decide(er.Args, er.Dir)
	ap, ask := s.gate(req, a, d)
	if ask != nil {
		return nil, ask
	}
	er.Approver = ap
	return er, nil
}

func (s *server) parseCommand(in *commandIn) (*daemon.ExecRequest, error) {
	var argv []string
	switch {
	case in.Command != "" && len(in.Args) > 0:
		return nil, errors.New("give either command (a shell line) or args (an argv), not both")
	case in.Command != "":
		argv = []string{"/bin/sh", "-c", in.Command}
	case len(in.Args) > 0:
		argv = in.Args
	default:
		return nil, errors.New("give command (a shell line) or args (an argv): both are empty")
	}
	dir, err := s.rel(in.Cwd)
	if err != nil {
		return nil, err
	}
	if dir == "." {
		dir = ""
	}
	if in.TimeoutSeconds < 0 {
		return nil, errors.New("timeout_seconds must not be negative")
	}
	if in.TimeoutSeconds > maxTimeoutSeconds {
		// In nanoseconds it would wrap round to a short limit.
		return nil, fmt.Errorf("timeout_seconds must be at most %d (the policy's wall-clock limit bounds it anyway)", maxTimeoutSeconds)
	}
	return &daemon.ExecRequest{Args: argv, Dir: dir, Wall: time.Duration(in.TimeoutSeconds) * time.Second}, nil
}

func (s *server) runCommand(ctx context.Context, req *mcp.CallToolRequest, in commandIn) (*mcp.CallToolResult, any, error) {
	er, res := s.execReq(req, &in)
	if res != nil {
		return res, nil, nil
	}
	out, errb := newCapture(s.opts.MaxOutput), newCapture(s.opts.MaxOutput)
	began := time.Now()
	rep, err := s.session().Exec(ctx, er, backend.Stdio{Stdout: out, Stderr: errb})
	return s.result(rep, err, out, errb, s.opts.Network.since(began)), nil, nil
}

// result describes how a command ended, for the model.
func (s *server) result(rep *sandbox.Report, err error, stdout, stderr *capture, network []string) *mcp.CallToolResult {
	if err != nil {
		return errorResult(refusal(rep, err))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "exit code: %d", rep.ExitCode)
	if rep.Reason != "exit" {
		fmt.Fprintf(&b, " (ended by: %s%s)", rep.Reason, reasonNote(rep))
	}
	b.WriteString("\n")
	for _, n := range append(network, notes(rep)...) {
		b.WriteString(n + "\n")
	}
	half := s.opts.MaxOutput / 2
	if stdout.Len()+stderr.Len() <= int64(s.opts.MaxOutput) {
		half = s.opts.MaxOutput
	}
	if stdout.Len() > 0 {
		t := stdout.show(half)
		b.WriteString("--- stdout ---\n" + t)
		if !strings.HasSuffix(t, "\n") {
			b.WriteString("\n")
		}
	}
	if stderr.Len() > 0 {
		t := stderr.show(half)
		b.WriteString("--- stderr ---\n" + t)
		if !strings.HasSuffix(t, "\n") {
			b.WriteString("\n")
		}
	}
	if stdout.Len() == 0 && stderr.Len() == 0 {
		b.WriteString("(no output)\n")
	}
	r := textResult(b.String())
	// A limit that killed the command, or moat's own failure, is an error
	// the model should notice; a command's own non-zero exit is not.
	r.IsError = rep.Reason != "exit" && rep.Reason != "signal"
	return r
}

// maxTimeoutSeconds is the most timeout_seconds a time.Duration holds.
const maxTimeoutSeconds = math.MaxInt64 / int(time.Second)

func reasonNote(rep *sandbox.Report) string {
	switch rep.Reason {
	case "timeout":
		return ": the wall-clock limit (timeout_seconds, never above the policy's limits.wall); use start_process for long commands"
	case "output":
		return ": the output limit"
	case "memory":
		// Files left in /tmp hold the sandbox's memory past the command
		// that wrote them; a model told so can delete them and go on.
		return ": the policy's memory limit, which the sandbox's files in /tmp, /dev/shm and home use too (delete those no longer needed)"
	case "pids", "cpu", "file_size":
		return ": the policy's " + rep.Reason + " limit"
	case "seccomp_kill":
		return ": a system call the policy's seccomp profile forbids"
	}
	return ""
}

// notes are what the model should know of a run besides its output and
// its network refusals: the system calls the sandbox refused.
func notes(rep *sandbox.Report) []string {
	var out []string
	for _, d := range rep.Denials {
		if d.Fallback != "" {
			continue // expected: the program falls back
		}
		out = append(out, fmt.Sprintf("denied by %s: %s (%s, %d times): %s", d.Layer, d.What, d.Errno, d.Count, d.Rule))
	}
	return out
}

// refusal explains why a command did not run.
func refusal(rep *sandbox.Report, err error) string {
	if errors.Is(err, sandbox.ErrDenied) && rep != nil && rep.Decision != nil {
		d := rep.Decision
		rule := "the rules (the command line hides what it runs)"
		if d.Rule != nil {
			rule = "rule `" + d.Rule.String() + "`"
		}
		cmd := shellQuote(d.Command)
		switch rep.Approval {
		case sandbox.ApprovalNoApprover:
			return fmt.Sprintf("refused by %s: %s. `%s` needs a person's approval and this client offers no way to ask one (elicitation): ask the user to approve it or to run it themselves.", rule, d.Reason, cmd)
		case sandbox.ApprovalTimeout:
			return fmt.Sprintf("not approved in time: `%s` waited for a person's approval (%s: %s) and nobody answered. Do not retry it at once; ask the user to approve it (moat approvals) or what to do instead.", cmd, rule, d.Reason)
		case sandbox.ApprovalDenied:
			return fmt.Sprintf("not approved: the user was asked about `%s` (%s: %s) and did not approve it. Do not retry it; ask the user what to do instead.\n(%v)", cmd, rule, d.Reason, err)
		}
		return fmt.Sprintf("refused by %s: %s. `%s` may not run in this session; do not retry it, ask the user if it is needed.", rule, d.Reason, cmd)
	}
	if errors.Is(err, sandbox.ErrDenied) {
		return err.Error()
	}
	if errors.Is(err, daemon.ErrEnded) || errors.Is(err, daemon.ErrDraining) {
		return "the sandbox session has ended: " + err.Error()
	}
	return "moat could not run the command: " + err.Error()
}

func (s *server) startProcess(ctx context.Context, req *mcp.CallToolRequest, in commandIn) (*mcp.CallToolResult, any, error) {
	er, res := s.execReq(req, &in)
	if res != nil {
		return res, nil, nil
	}
	p, err := s.session().Start(er, false)
	if err != nil {
		// A refusal at start has no report: the decision is told again
		// from the rules.
		_, d := s.decide(er.Args, er.Dir)
		rep := &sandbox.Report{Decision: &d, Approval: sandbox.ApprovalDenied}
		if er.Approver == nil {
			rep.Approval = sandbox.ApprovalNoApprover
		}
		if d.Verdict == harness.Deny {
			rep.Approval = ""
		}
		return errorResult(refusal(rep, err)), nil, nil
	}
	// A command refused or failing at once says so now rather than at
	// the first read_output.
	select {
	case <-p.Done():
		rep, err := p.Result()
		if err != nil {
			return errorResult(refusal(rep, err)), nil, nil
		}
	case <-time.After(100 * time.Millisecond):
	}
	return textResult(fmt.Sprintf("started process %s: %s\nread its output with read_output {\"id\": %q}, end it with stop_process.", p.ID, shellQuote(p.Args), p.ID)), nil, nil
}

func (s *server) process(id string) (*daemon.Process, error) {
	p, err := s.session().Process(id)
	if err != nil {
		var ids []string
		for _, p := range s.session().Processes() {
			ids = append(ids, p.ID)
		}
		return nil, fmt.Errorf("no background process %q (the processes of this session: %s)", id, strings.Join(ids, ", "))
	}
	return p, nil
}

func (s *server) readOutput(ctx context.Context, _ *mcp.CallToolRequest, in processIn) (*mcp.CallToolResult, any, error) {
	p, err := s.process(in.ID)
	if err != nil {
		return errorResult(err.Error()), nil, nil
	}
	wait := min(max(in.WaitSeconds, 0), 60)
	return s.output(ctx, p, time.Duration(wait)*time.Second), nil, nil
}

// output returns p's output since the last read, and its state.
func (s *server) output(ctx context.Context, p *daemon.Process, wait time.Duration) *mcp.CallToolResult {
	s.mu.Lock()
	after := s.cursors[p.ID]
	s.mu.Unlock()
	chunks, next, dropped := p.Read(ctx, after, wait)
	s.mu.Lock()
	s.cursors[p.ID] = next
	s.mu.Unlock()
	var out bytes.Buffer
	for _, c := range chunks {
		out.Write(c.Data)
	}
	var b strings.Builder
	if p.Running() {
		fmt.Fprintf(&b, "process %s is running\n", p.ID)
	} else {
		rep, err := p.Result()
		if err != nil {
			fmt.Fprintf(&b, "process %s did not run: %s\n", p.ID, refusal(rep, err))
		} else {
			sig := ""
			if rep.Signal != nil {
				sig = " " + *rep.Signal
			}
			fmt.Fprintf(&b, "process %s has ended: exit code %d (ended by: %s%s%s)\n", p.ID, rep.ExitCode, rep.Reason, sig, reasonNote(rep))
			for _, n := range notes(rep) {
				b.WriteString(n + "\n")
			}
		}
	}
	if dropped > 0 {
		fmt.Fprintf(&b, "[%d earlier writes were dropped: the session keeps only the latest output]\n", dropped)
	}
	if out.Len() == 0 {
		b.WriteString("(no new output)\n")
	} else {
		t, _ := truncate(out.Bytes(), s.opts.MaxOutput)
		b.WriteString("--- output (stdout and stderr) ---\n" + t)
	}
	return textResult(b.String())
}

func (s *server) stopProcess(ctx context.Context, _ *mcp.CallToolRequest, in stopIn) (*mcp.CallToolResult, any, error) {
	p, err := s.process(in.ID)
	if err != nil {
		return errorResult(err.Error()), nil, nil
	}
	if p.Running() {
		p.Signal(syscall.SIGTERM)
		select {
		case <-p.Done():
		case <-time.After(3 * time.Second):
			p.Signal(syscall.SIGKILL)
			select {
			case <-p.Done():
			case <-time.After(10 * time.Second):
				return errorResult(fmt.Sprintf("process %s did not end after SIGKILL", p.ID)), nil, nil
			}
		case <-ctx.Done():
			return errorResult("cancelled"), nil, nil
		}
	}
	return s.output(ctx, p, 0), nil, nil
}

func (s *server) sessionInfo(context.Context, *mcp.CallToolRequest, noIn) (*mcp.CallToolResult, any, error) {
	p := s.session().Policy()
	info := map[string]any{
		"workspace":      s.session().Workspace,
		"workspace_mode": s.session().WorkspaceMode,
		"writable":       writable(p),
		"read_only":      p.Filesystem.ReadOnly,
		"hidden":         p.Filesystem.Deny,
		"protected":      s.session().Protected(),
		"network":        network(p),
		"limits":         p.Limits,
		"rules":          p.Rules,
		"builtin_rules":  p.Harness.Builtin,
		"expires":        s.session().Expires,
	}
	if len(p.Secrets) > 0 {
		info["secrets"] = secrets(p)
	}
	return textResult(jsonText(info)), nil, nil
}

// secrets says what the agent needs of each secret: the variable that
// holds its placeholder, where the proxy puts the value, and on what.
// Never its source or its value.
func secrets(p *policy.Policy) []map[string]any {
	var out []map[string]any
	for _, c := range p.Secrets {
		m := map[string]any{"env": c.Name, "hosts": c.Hosts}
		switch {
		case c.Header != "":
			m["note"] = "the proxy sets the " + strings.TrimSpace(strings.SplitN(c.Header, ":", 2)[0]) + " header on HTTPS requests to these hosts: send nothing"
		case c.Query != "":
			m["note"] = "send $" + c.Name + " in a header, or as the whole value of the query parameter " + c.Query + ", over HTTPS to these hosts; the proxy puts the real value in its place"
		default:
			m["note"] = "send $" + c.Name + " in a header over HTTPS to these hosts; the proxy puts the real value in its place"
		}
		if len(c.Methods) > 0 {
			m["methods"] = c.Methods
		}
		if len(c.Paths) > 0 {
			m["paths"] = c.Paths
		}
		out = append(out, m)
	}
	return out
}

func writable(p *policy.Policy) []string {
	var out []string
	switch p.Workspace.Mode {
	case policy.WorkspaceDirect:
		out = append(out, p.Workspace.Path+" (the workspace itself: writes are real)")
	case policy.WorkspaceOverlay, policy.WorkspaceCopy:
		out = append(out, p.Workspace.Path+" (writes go to the session's change set: see diff, keep them with apply)")
	}
	return append(out, p.Filesystem.ReadWrite...)
}

func network(p *policy.Policy) map[string]any {
	n := map[string]any{"mode": p.Network.Mode}
	switch p.Network.Mode {
	case "none":
		n["note"] = "no network: only the sandbox's own loopback; every other connection is refused"
	case "allow":
		n["allow"] = p.Network.Allow
		n["deny"] = p.Network.Deny
		n["https_only"] = p.Network.HTTPSOnly
		if len(p.Network.AllowCIDRs) > 0 {
			n["allow_cidrs"] = p.Network.AllowCIDRs
		}
		n["note"] = "only the hosts in allow are reachable, through the sandbox's proxy"
	case "host":
		n["note"] = "the host's network, unfiltered"
	}
	return n
}
