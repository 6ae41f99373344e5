package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// The session commands talk to `moat serve`: moat session create|ls|rm,
// moat exec and moat ps. They hold no rule of their own: the daemon
// checks every request.

// connect returns a client of the daemon: TCP when MOAT_HOST is set (with
// the bearer token in MOAT_TOKEN), else the unix socket. The default
// socket, which no one named, is held to a daemon of the caller's or
// root's (client.UnixOwn).
func connect(sock string) *client.Client {
	if h := os.Getenv("MOAT_HOST"); h != "" {
		return client.TCP(h, os.Getenv("MOAT_TOKEN"))
	}
	if sock == client.DefaultSocket() && os.Getenv("MOAT_SOCKET") == "" {
		return client.UnixOwn(sock)
	}
	return client.Unix(sock)
}

// apiFail prints a daemon's refusal, or a failure to reach it, and
// returns moat's own exit status.
func apiFail(stderr io.Writer, cmd string, err error, policyFile string) int {
	var ae *client.Error
	if errors.As(err, &ae) {
		// A message may quote a name a session's command made.
		fmt.Fprintf(stderr, "moat %s: %s (%s)\n", cmd, workspace.EscapeMessage(ae.Message), workspace.EscapeText(ae.Code))
		for _, d := range ae.Details {
			// A daemon of another user's names the policy it was sent
			// "policy"; one of this user's, by its file already.
			if rest, ok := strings.CutPrefix(d, "policy"); ok && policyFile != "" {
				d = policyFile + rest
			}
			fmt.Fprintf(stderr, "  %s\n", workspace.EscapeText(d))
		}
		return exitMoatError
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Path == "/dev/stdout" && errors.Is(err, syscall.EPIPE) {
		// Whoever read moat's output stopped (moat session events -f |
		// head): nothing to say, and nothing of the daemon's.
		return exitMoatError
	}
	if errors.Is(err, client.ErrForeignDaemon) {
		// Said whole by the client; nothing was sent.
		for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(u) {
			if u != client.ErrForeignDaemon && strings.Contains(u.Error(), client.ErrForeignDaemon.Error()) {
				err = u
			}
		}
		fmt.Fprintf(stderr, "moat %s: %v\n", cmd, err)
		return exitMoatError
	}
	hint := "is moat serve running? MOAT_SOCKET or --socket names another daemon's socket"
	if errors.Is(err, syscall.EACCES) {
		// The daemon runs, and its socket is not this user's to use.
		hint = "the daemon runs, but its socket is not yours to use: its owner can open it to a group (moat serve --socket-mode) or give you a token for its TCP listener (MOAT_HOST, MOAT_TOKEN)"
	}
	fmt.Fprintf(stderr, "moat %s: %v (%s)\n", cmd, err, hint)
	return exitMoatError
}

func cmdSession(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || asksHelp(args[:1]) {
		fmt.Fprintln(stderr, "usage: moat session create|ls|rm|diff|apply|discard|events [flags] [SESSION] (moat session CMD --help for each)")
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "create":
		return cmdSessionCreate(args[1:], stdout, stderr)
	case "ls", "list":
		return cmdSessionList(args[1:], stdout, stderr)
	case "rm":
		return cmdSessionRemove(args[1:], stderr)
	case "diff", "apply", "discard":
		return cmdSessionReview(args[0], args[1:], stdout, stderr)
	case "events":
		return cmdSessionEvents(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "moat session: unknown command %q (want create, ls, rm, diff, apply, discard, events)\n", args[0])
	return 2
}

func cmdSessionCreate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("session create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	policyFile := new(string)
	fs.Var(policyFlag{policyFile}, "policy", "policy file (TOML, or JSON); default: the built-in policy")
	ws := fs.String("workspace", ".", "the workspace directory")
	temp := fs.Bool("temp", false, "use a new empty workspace, removed with the session, instead of --workspace")
	mode := fs.String("workspace-mode", "", "direct, readonly, overlay or copy (default: the policy's)")
	ttl := fs.String("ttl", "", "time to live, e.g. 2h (default: the daemon's)")
	idle := fs.String("idle-timeout", "", "end the session when unused this long (default: the daemon's)")
	template := fs.String("template", "", "one of the daemon's templates (moat serve --templates) instead of --policy; with --temp, from its warm pool")
	learn := fs.Bool("learn", false, "run the rules in report-only mode: what they would deny or ask about runs, audited as learn (moat serve --audit FILE, then moat policy suggest FILE)")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "moat session create: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := emptyFlag(fs, "workspace", "workspace-mode", "ttl", "idle-timeout", "template"); err != nil {
		fmt.Fprintf(stderr, "moat session create: %v\n", err)
		return 2
	}
	if *template != "" && *policyFile != "" {
		fmt.Fprintln(stderr, "moat session create: --template and --policy: give one")
		return 2
	}
	if *temp && flagSet(fs, "workspace") {
		fmt.Fprintln(stderr, "moat session create: --temp and --workspace: give one (--temp makes a new empty workspace)")
		return 2
	}
	// Checked here, before the daemon is reached, as the daemon checks
	// them: its refusal would name the policy's field, not the flag.
	if modes := []string{policy.WorkspaceDirect, policy.WorkspaceReadOnly, policy.WorkspaceOverlay, policy.WorkspaceCopy}; *mode != "" && !slices.Contains(modes, *mode) {
		fmt.Fprintf(stderr, "moat session create: --workspace-mode: %q is not one of %s\n", *mode, strings.Join(modes, ", "))
		return 2
	}
	for _, d := range []struct{ flag, v string }{{"--ttl", *ttl}, {"--idle-timeout", *idle}} {
		if _, err := time.ParseDuration(d.v); d.v != "" && err != nil {
			why := fmt.Sprintf("%q is not a duration such as \"30m\"", d.v)
			if _, perr := policy.ParseDuration(d.v); errors.Is(perr, policy.ErrDurationTooLong) {
				why = perr.Error()
			}
			fmt.Fprintf(stderr, "moat session create: %s: %s\n", d.flag, why)
			return 2
		}
	}
	req := &client.CreateSessionRequest{WorkspaceMode: *mode, TTL: *ttl, IdleTimeout: *idle, Template: *template, Learn: *learn}
	if *policyFile != "" {
		data, err := readBounded(*policyFile, 1<<20)
		if err != nil {
			fmt.Fprintf(stderr, "moat session create: %v\n", err)
			return exitMoatError
		}
		req.Policy = string(data)
		if !flagSet(fs, "workspace") {
			*ws = policyWorkspace(*policyFile, data, *ws)
		}
		// The daemon, when it is this user's, takes the file's directory
		// for the policy's relative paths, as moat run does, and keeps
		// the file read-only in the session.
		if req.PolicyFile, err = filepath.Abs(*policyFile); err != nil {
			fmt.Fprintf(stderr, "moat session create: %v\n", err)
			return exitMoatError
		}
	}
	if !*temp {
		abs, err := filepath.Abs(*ws)
		if err != nil {
			fmt.Fprintf(stderr, "moat session create: %v\n", err)
			return exitMoatError
		}
		req.Workspace = abs
	}
	c := connect(*sock)
	defer c.Close()
	s, err := c.CreateSession(context.Background(), req)
	var ae *client.Error
	if err != nil && req.PolicyFile != "" && errors.As(err, &ae) && ae.Code == client.CodeBadRequest &&
		strings.Contains(ae.Message, `unknown field "policy_file"`) {
		// A daemon started from an older moat: it would take the policy
		// as text alone, with neither the file's directory nor the file
		// kept read-only in the session.
		fmt.Fprintf(stderr, "moat session create: the daemon at %s is older than this moat and cannot keep %s read-only in the session: restart it (moat serve)\n", workspace.EscapeText(*sock), workspace.EscapeText(*policyFile))
		return exitMoatError
	}
	if err != nil {
		return apiFail(stderr, "session create", err, *policyFile)
	}
	fmt.Fprintln(stdout, s.ID)
	return 0
}

// readBounded reads a regular file of at most max bytes. A FIFO is not
// waited on: the file may be in a direct workspace, where a session's
// command could have put one.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("%s is over %d bytes", path, max)
	}
	return data, err
}

func cmdSessionList(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("session ls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "moat session ls: unexpected argument %q (it lists all your sessions)\n", fs.Arg(0))
		return 2
	}
	c := connect(*sock)
	defer c.Close()
	list, err := c.Sessions(context.Background())
	if err != nil {
		return apiFail(stderr, "session ls", err, "")
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMODE\tWORKSPACE\tAGE\tEXPIRES IN\tEXECS\tRUNNING")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", s.ID, s.WorkspaceMode, dash(workspace.EscapeText(s.Workspace)),
			time.Since(s.CreatedAt).Round(time.Second), time.Until(s.ExpiresAt).Round(time.Second), s.Execs, s.Running)
	}
	tw.Flush()
	return 0
}

func cmdSessionRemove(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("session rm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	if ok, code := parseFlagsInterspersed(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "moat session rm: name the sessions to end")
		return 2
	}
	c := connect(*sock)
	defer c.Close()
	code := 0
	for _, id := range fs.Args() {
		end, err := c.EndSession(context.Background(), id)
		if err != nil {
			code = apiFail(stderr, "session rm", err, "")
			continue
		}
		for _, w := range end.Warnings {
			fmt.Fprintf(stderr, "moat: WARNING: session %s: %s\n", id, workspace.EscapeText(w)) // may quote a path
		}
	}
	return code
}

// cmdExec is moat exec SESSION -- CMD: the command runs in the session,
// its output is streamed, and moat exits as moat run would.
func cmdExec(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	var env stringList
	fs.Var(&env, "env", "NAME=VALUE for the command (repeatable)")
	dir := fs.String("dir", "", "working directory, relative to the workspace")
	wall := fs.String("wall", "", "wall-time limit for this command, below the policy's")
	input := fs.Bool("i", false, "stream moat's standard input to the command (with -d: read first, at most 512 KiB of text)")
	detach := fs.Bool("d", false, "run in the background and print the process id (see moat ps)")
	tty := fs.Bool("t", false, "give the command a terminal, relaying moat's (raw mode, window size)")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	rest := fs.Args()
	// A "--" the flags end at came before any SESSION: the first word
	// of the command is not one (moat exec "$S" -- … with $S empty).
	noSession := len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" && !(len(rest) > 1 && rest[1] == "--")
	if len(rest) > 1 && rest[1] == "--" {
		rest = append(rest[:1], rest[2:]...)
	}
	if len(rest) < 2 || noSession {
		fmt.Fprintln(stderr, "usage: moat exec [flags] SESSION -- CMD [ARGS...]")
		return 2
	}
	req := &client.ExecRequest{Args: rest[1:], Env: env, Dir: *dir, Wall: *wall}
	// Output to one file (2>&1, a terminal) comes in the order written.
	req.StderrToStdout = !*detach && sandbox.OneFile(stdout, stderr)
	if *input && *detach {
		// A background command's input is the request's, read whole.
		data, err := readInput(stdin)
		if err != nil {
			fmt.Fprintf(stderr, "moat exec: stdin: %v\n", err)
			return exitMoatError
		}
		req.Stdin = string(data)
	}
	if *tty && (*detach || *input) {
		fmt.Fprintln(stderr, "moat exec: -t relays the terminal; it does not go with -d or -i")
		return 2
	}
	c := connect(*sock)
	defer c.Close()
	// asking: the command waits for an approval and has printed nothing
	// since; a Ctrl-C then ends the request (the ask with it) rather than
	// go to a command that has not started, or is held in an execve.
	var asking atomic.Bool
	moatErr := stderr // moat's own lines, which are not the command's output
	c.OnApproval = func(a client.Approval) {
		asking.Store(true)
		fmt.Fprintf(moatErr, "moat exec: %s waits for a person's approval (%s): moat approve %s, or moat deny %s\n",
			approvalAction(a), workspace.EscapeText(dash(a.Rule)), a.ID, a.ID)
	}
	var broken atomic.Bool // a reader of moat's output went away
	stdout, stderr = outputEnds(stdout, &asking, &broken), outputEnds(stderr, &asking, &broken)
	if *tty {
		// The terminal is moat's: its type is too (as docker exec -t
		// passes it), unless --env names one.
		if t := os.Getenv("TERM"); t != "" && !slices.ContainsFunc(req.Env, func(kv string) bool { return strings.HasPrefix(kv, "TERM=") }) {
			req.Env = append(req.Env, "TERM="+t)
		}
		return execTTY(c, rest[0], req, stdin, stdout, stderr)
	}
	if *detach {
		p, err := startNoting(c, rest[0], req)
		if err != nil {
			return apiFail(stderr, "exec", err, "")
		}
		fmt.Fprintln(stdout, p.ID)
		return 0
	}
	// Ctrl-C (or SIGTERM, SIGHUP) is sent on to the command, as moat run
	// sends it (a test runner's trap, a server's clean stop); a second
	// one ends the request, and the daemon kills the command with it:
	// moat exec then exits as the signal would have ended it (128+N).
	// Over TCP, where a proxy may hold an open request body back, only
	// -i sends an interactive exec: without it the first signal ends the
	// request.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	var x *client.Interactive
	var rep *client.ExitReport
	var err error
	if *input || c.Direct() {
		if x, err = c.Interactive(ctx, rest[0], req, stdout, stderr); err != nil {
			return apiFail(stderr, "exec", err, "")
		}
		if *input {
			go relayStdin(x, stdin)
		} else {
			x.CloseStdin()
		}
	}
	// The relay below ends with cmdExec (stopped).
	var forced atomic.Value
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		forwarded := false
		for {
			select {
			case s := <-sigs:
				if x != nil && !forwarded && !asking.Load() && x.Signal(sandbox.SignalName(s.(syscall.Signal))) == nil {
					forwarded = true
					continue
				}
				forced.Store(s)
				cancel()
				return
			case <-stopped:
				return
			}
		}
	}()
	if x != nil {
		rep, err = x.Wait()
	} else {
		rep, err = c.Exec(ctx, rest[0], req, stdout, stderr)
	}
	if err != nil {
		// What was dropped from the output written before is said
		// however the exec ended.
		printRulesRefused(stderr, client.ErrorDenials(err))
		if s, ok := forced.Load().(syscall.Signal); ok {
			fmt.Fprintf(stderr, "moat exec: %s: the command was stopped\n", sandbox.SignalName(s))
			return 128 + int(s)
		}
		if broken.Load() {
			// The reader of its output went away (moat exec … | head):
			// the request ended, and the daemon the command with it; it
			// ends as a command of a shell's pipeline would, with
			// nothing said.
			return 128 + int(syscall.SIGPIPE)
		}
		return apiFail(stderr, "exec", err, "")
	}
	if rep.Network != "" {
		fmt.Fprintf(stderr, "moat exec: %s\n", workspace.EscapeText(rep.Network)) // names the command sent
	}
	if rep.Error != "" {
		fmt.Fprintf(stderr, "moat exec: %s\n", workspace.EscapeMessage(rep.Error)) // may quote a person's reason or a name
	} else if rep.Reason != "" && rep.Reason != "exit" && !brokenPipe(rep.Reason, rep.Signal) {
		fmt.Fprintf(stderr, "moat exec: %s\n", workspace.EscapeMessage(execSummary(rep)))
	} else if len(rep.LimitsHit) > 0 {
		fmt.Fprintf(stderr, "moat exec: during the command it hit the session's %s limit; the command went on and exited with status %d\n", strings.Join(rep.LimitsHit, ", "), rep.ExitCode)
	}
	printRulesRefused(stderr, rep.Denials)
	return cutStatus(rep.Reason, rep.Budget, rep.ExitCode)
}

// startNoting starts a background command. The daemon answers once it
// has started, which an ask holds until a person answers: meanwhile the
// session's pending approvals are looked at, and each new one is named
// as a foreground exec names its asks.
func startNoting(c *client.Client, id string, req *client.ExecRequest) (*client.Process, error) {
	type started struct {
		p   *client.Process
		err error
	}
	done := make(chan started, 1)
	go func() {
		p, err := c.Start(context.Background(), id, req)
		done <- started{p, err}
	}()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	shown := map[string]bool{}
	for {
		select {
		case r := <-done:
			return r.p, r.err
		case <-tick.C:
			pending, err := c.Approvals(context.Background())
			if err != nil {
				continue
			}
			for _, a := range pending {
				if a.Session == id && !shown[a.ID] {
					shown[a.ID] = true
					c.OnApproval(a)
				}
			}
		}
	}
}

// relayStdin streams moat's standard input to the command as it is read
// (any bytes, any length, in bounded memory), and closes the command's at
// its end.
func relayStdin(x *client.Interactive, stdin io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := stdin.Read(buf)
		if n > 0 {
			if _, werr := x.Write(buf[:n]); werr != nil {
				return // the command has ended
			}
		}
		if err != nil {
			x.CloseStdin()
			return
		}
	}
}

// readInput reads a background command's input: the request's, at most
// what the daemon takes in one body, and text (JSON carries it as a
// string).
func readInput(stdin io.Reader) ([]byte, error) {
	const max = 512 << 10 // with room for JSON's escapes in the daemon's bound on a body
	data, err := io.ReadAll(io.LimitReader(stdin, max+1))
	switch {
	case err != nil:
		return nil, err
	case len(data) > max:
		return nil, fmt.Errorf("over %d bytes: a background command takes its input in one request; write the rest with the API (POST .../processes/ID/stdin), or run it in the foreground", max)
	case !utf8.Valid(data):
		return nil, errors.New("not text (UTF-8): a background command's input is sent as text; write binary input with the API (POST .../processes/ID/stdin), or run it in the foreground")
	}
	return data, nil
}

// killedOrFailed opens the account of a limit: the command was killed,
// or (the limit killed one of its processes) it exited by itself.
func killedOrFailed(r *client.ExitReport, sig string) string {
	if r.Signal == "" {
		return fmt.Sprintf("command failed (exit %d)", r.ExitCode)
	}
	return "killed" + sig
}

// execSummary is the one-line account of a session command that did not
// simply end, as moat run prints one: without it, a command the wall
// clock or the memory limit killed looks like one that died of SIGKILL.
func execSummary(r *client.ExitReport) string {
	sig := ""
	if r.Signal != "" {
		sig = " (" + r.Signal + ")"
	}
	switch r.Reason {
	case "timeout":
		return "killed: wall-clock limit reached (the session's limits.wall, or moat exec --wall)"
	case "cpu":
		return killedOrFailed(r, sig) + ": CPU-time limit reached (the session's limits.cpu)"
	case "memory":
		// The limit is the session's, and files left in its tmpfs
		// mounts hold memory past the command that wrote them: without
		// saying so, every later command killed looks like its own fault.
		return killedOrFailed(r, sig) + ": memory limit reached (the session's limits.memory, which its other processes and its files in /tmp, /dev/shm and home use too)"
	case "pids":
		return fmt.Sprintf("command failed (exit %d%s) after the process limit refused forks (the session's limits.pids)", r.ExitCode, sig)
	case "output":
		if r.Signal == "" {
			return fmt.Sprintf("output limit reached (the session's limits.output): what the command wrote past it was dropped; it exited with status %d%s", r.ExitCode, cutNote(r.ExitCode))
		}
		return "killed: output limit reached (the session's limits.output)"
	case "file_size":
		return killedOrFailed(r, sig) + ": file-size limit reached (the session's limits.file_size)"
	case "disk":
		return fmt.Sprintf("command failed (exit %d%s) after the disk limit was reached (the session's limits.disk)", r.ExitCode, sig)
	case "protection":
		var paths []string
		for _, d := range r.Denials {
			if d.Layer == client.LayerMount {
				paths = append(paths, d.What)
			}
		}
		return "killed: " + protectionLost(paths)
	case "killed":
		if r.SessionEnded != "" {
			return fmt.Sprintf("killed: the session ended (%s)", r.SessionEnded)
		}
		return "killed: the command was interrupted"
	case "signal":
		return "command died of signal" + sig
	case "budget":
		if r.Budget != "" {
			return fmt.Sprintf("ended: the %s budget of the session's policy is spent ([budgets])", r.Budget)
		}
		return "ended: a budget of the session's policy is spent"
	case "seccomp_kill":
		return "command killed by the seccomp profile (SIGSYS): it made a system call the profile kills or traps on"
	}
	return "command ended: " + r.Reason
}

func cmdPs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ps", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	if ok, code := parseFlagsInterspersed(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: moat ps SESSION")
		return 2
	}
	c := connect(*sock)
	defer c.Close()
	ps, err := c.Processes(context.Background(), fs.Arg(0))
	if err != nil {
		return apiFail(stderr, "ps", err, "")
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tAGE\tCOMMAND")
	for _, p := range ps {
		status := "running"
		if p.Exit != nil {
			status = fmt.Sprintf("exited %d", p.Exit.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.ID, status, time.Since(p.StartedAt).Round(time.Second), workspace.EscapeText(strings.Join(p.Args, " ")))
	}
	tw.Flush()
	return 0
}

// cmdCp is moat cp: a file or a directory between the host and a
// session's workspace, SESSION:PATH naming the session's side (PATH
// relative to its workspace). A directory's contents go into the
// directory named on the other side, made when missing.
func cmdCp(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	force := fs.Bool("force", false, "copy a session's directory out whole, with the paths host tools read or run on their own (.git, .envrc, .vscode, …) that are otherwise left out")
	if ok, code := parseFlagsInterspersed(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: moat cp SESSION:PATH HOSTPATH | HOSTPATH SESSION:PATH  (a file or a directory; HOSTPATH - is standard output, a directory as tar)")
		return 2
	}
	src, dst := fs.Arg(0), fs.Arg(1)
	// SESSION:PATH: a host path may hold a colon too, after a slash.
	sessionSide := func(s string) (id, path string, ok bool) {
		id, path, ok = strings.Cut(s, ":")
		return id, path, ok && id != "" && !strings.Contains(id, "/")
	}
	sid, spath, fromSession := sessionSide(src)
	did, dpath, toSession := sessionSide(dst)
	if fromSession == toSession {
		fmt.Fprintln(stderr, "moat cp: exactly one side is SESSION:PATH")
		return 2
	}
	c := connect(*sock)
	defer c.Close()
	ctx := context.Background()
	if fromSession {
		if fi, err := c.Stat(ctx, sid, spath); err == nil && fi.Type == "dir" {
			return cpDirFrom(c, sid, spath, dst, *force, stdout, stderr)
		}
		data, err := c.ReadFile(ctx, sid, spath)
		if err != nil {
			return apiFail(stderr, "cp", err, "")
		}
		if dst == "-" {
			// What a command wrote reaches a terminal as moat exec's
			// output does: filtered.
			out, done := terminalOutput(stdout, stderr, "cp")
			out.Write(data)
			done()
			return 0
		}
		// Into a directory named (its own, not through a link), as cp does.
		if fi, err := os.Lstat(dst); err == nil && fi.IsDir() || strings.HasSuffix(dst, "/") {
			dst = filepath.Join(dst, path.Base(spath))
		}
		if err := writeNotThroughLink(dst, data); err != nil {
			fmt.Fprintf(stderr, "moat cp: %v\n", err)
			return exitMoatError
		}
		return 0
	}
	fi, err := os.Stat(src)
	if err == nil && fi.IsDir() {
		return cpDirTo(c, src, did, dpath, stderr)
	}
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", src)
	}
	var data []byte
	if err == nil {
		data, err = readBounded(src, 16<<20)
	}
	if err != nil {
		fmt.Fprintf(stderr, "moat cp: %v\n", err)
		return exitMoatError
	}
	// Into a directory named, as cp does.
	if st, err := c.Stat(ctx, did, dpath); err == nil && st.Type == "dir" || strings.HasSuffix(dpath, "/") || dpath == "" {
		dpath = path.Join(dpath, filepath.Base(src))
	}
	if err := c.WriteFile(ctx, did, dpath, data, fi.Mode().Perm()); err != nil {
		return apiFail(stderr, "cp", err, "")
	}
	return 0
}

// writeNotThroughLink writes data to the file dst. As for a directory's
// entries (cpDirFrom), a link of that name is replaced, not written
// through: a direct session's commands write where dst may be, and a link
// they put there would carry what they wrote to any file of the caller's.
func writeNotThroughLink(dst string, data []byte) error {
	if fi, err := os.Lstat(dst); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		if st, err := os.Stat(dst); err == nil && st.IsDir() {
			return fmt.Errorf("open %s: is a directory", dst) // as before: not replaced
		}
		if err := os.Remove(dst); err != nil {
			return err
		}
	}
	// O_NOFOLLOW: a link made again since is refused, not followed.
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// outputEnds is w, which clears asking when the command writes to it,
// and sets broken when a write finds its reader gone.
func outputEnds(w io.Writer, asking, broken *atomic.Bool) io.Writer {
	return &endsWriter{w: w, asking: asking, broken: broken}
}

type endsWriter struct {
	w              io.Writer
	asking, broken *atomic.Bool
}

func (e *endsWriter) Write(p []byte) (int, error) {
	e.asking.Store(false)
	n, err := e.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		e.broken.Store(true)
	}
	return n, err
}

// Unwrap is the writer under it: the client filters output to a terminal
// and finds the terminal through it.
func (e *endsWriter) Unwrap() io.Writer { return e.w }

// cmdLogs is moat logs: what a session's background command wrote, its
// stdout to stdout and its stderr to stderr, as the daemon keeps it; -f
// follows it until the command ends.
func cmdLogs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	follow := fs.Bool("f", false, "follow the output until the command ends")
	if ok, code := parseFlagsInterspersed(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: moat logs [-f] SESSION ID  (ID: a background command's, as moat exec -d and moat ps give it)")
		return 2
	}
	c := connect(*sock)
	defer c.Close()
	// The command's output to a terminal is filtered as moat exec's is.
	outW, errW, done := client.TerminalOutput(stdout, stderr)
	code := copyLogs(c, fs.Arg(0), fs.Arg(1), *follow, outW, errW, stderr)
	var filtered []string
	for _, d := range done() {
		filtered = append(filtered, fmt.Sprintf("%s ×%d", d.What, d.Count))
	}
	printDropped(stderr, "logs", filtered)
	return code
}

// copyLogs is moat logs' copy of a background command's output to outW and
// errW; moat's own messages go to stderr.
func copyLogs(c *client.Client, session, id string, follow bool, outW, errW, stderr io.Writer) int {
	ctx := context.Background()
	var after, dropped int64
	for {
		var wait time.Duration
		if follow {
			wait = 30 * time.Second
		}
		o, err := c.Output(ctx, session, id, after, wait)
		if err != nil {
			return apiFail(stderr, "logs", err, "")
		}
		if o.Dropped > dropped {
			fmt.Fprintf(stderr, "moat logs: %d writes were dropped (the daemon keeps the newest)\n", o.Dropped-dropped)
			dropped = o.Dropped
		}
		for _, ch := range o.Chunks {
			w := outW
			if ch.Stream == "stderr" {
				w = errW
			}
			data := ch.DataBase64
			if ch.Data != "" {
				data = []byte(ch.Data)
			}
			if _, err := w.Write(data); err != nil {
				if errors.Is(err, syscall.EPIPE) {
					return 128 + int(syscall.SIGPIPE) // … | head
				}
				fmt.Fprintf(stderr, "moat logs: %v\n", err)
				return exitMoatError
			}
		}
		after = o.Next
		if !follow || !o.Running && len(o.Chunks) == 0 {
			return 0
		}
	}
}

// cmdKill is moat kill: a signal (TERM unless -s names another) to a
// session's background command.
func cmdKill(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", client.DefaultSocket(), "the daemon's unix socket")
	sig := fs.String("s", "TERM", "the `SIGNAL`: TERM, KILL, INT, HUP, QUIT, USR1, USR2, CONT, STOP or WINCH")
	if ok, code := parseFlagsInterspersed(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: moat kill [-s SIGNAL] SESSION ID  (ID: a background command's, as moat exec -d and moat ps give it)")
		return 2
	}
	c := connect(*sock)
	defer c.Close()
	if err := c.Signal(context.Background(), fs.Arg(0), fs.Arg(1), *sig); err != nil {
		return apiFail(stderr, "kill", err, "")
	}
	return 0
}
