package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
	"golang.org/x/sys/unix"
)

// loadPolicy builds the effective policy: the built-in default, overlaid
// by the policy file, overlaid by the flags; then resolved and validated.
func (f *runFlags) loadPolicy(stderr io.Writer) (*policy.Policy, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("current directory: %w", err)
	}
	home, _ := os.UserHomeDir()
	ws := cwd
	if f.o.Workspace != "" {
		ws, err = filepath.Abs(f.o.Workspace)
		if err != nil {
			return nil, err
		}
	}
	var p *policy.Policy
	switch {
	case f.policyFile != "":
		p, err = policy.Load(f.policyFile)
	default:
		local := filepath.Join(ws, ".moat.toml")
		if has, lerr := localPolicy(local); lerr != nil {
			return nil, lerr
		} else if has {
			p, err = loadTrusted(local)
			var ue *policy.UntrustedError
			if f.showOnly && errors.As(err, &ue) {
				fmt.Fprintf(stderr, "moat: note: %v\n", err)
				p, err = policy.Load(local)
			}
			if err == nil {
				fmt.Fprintf(stderr, "moat: using policy %s\n", local)
			}
		} else {
			p = policy.Default()
		}
	}
	if err != nil {
		return nil, err
	}
	f.o.Dir = cwd
	if err := f.o.Apply(p); err != nil {
		return nil, err
	}
	if err := p.ResolveAndValidate(cwd, home); err != nil {
		return nil, err
	}
	// What the run would refuse before starting, policy show refuses too.
	if err := sandbox.CheckPolicy(p); err != nil {
		return nil, err
	}
	return p, nil
}

// pipeSafe is w, but for moat's own stdout or stderr, a copy of it at
// another descriptor: the Go runtime ends the process on a write to fd 1
// or 2 that fails with EPIPE (moat run ... | head), where a write to any
// other fails with the error. moat run must go on then: the relay passes
// the failure on to the command, and the run ends as any other does, its
// quarantine, revocations and report included. A handler for SIGPIPE
// would do it too, but only from the moment it is installed, which the
// run puts off (see cmdRun), and a reader can go before that.
func pipeSafe(w io.Writer) io.Writer {
	f, ok := w.(*os.File)
	if !ok || f.Fd() != 1 && f.Fd() != 2 {
		return w
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return w
	}
	return os.NewFile(uintptr(fd), f.Name())
}

func cmdRun(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f := newRunFlags("run")
	if ok, code := f.parse(args, stdout, stderr); !ok {
		if f.parseErr != nil {
			failedReport(f, nil, f.parseErr, stdout, stderr)
		}
		return code
	}
	cmdline := f.fs.Args()
	if err := f.auditBounds(); err != nil {
		fmt.Fprintf(stderr, "moat: %v\n", err)
		failedReport(f, nil, err, stdout, stderr)
		return exitMoatError
	}
	if len(cmdline) == 0 {
		err := errors.New("no command given (usage: moat run [flags] -- CMD [ARGS...])")
		fmt.Fprintf(stderr, "moat run: %v\n", err)
		failedReport(f, nil, err, stdout, stderr)
		return exitMoatError
	}
	stdout, stderr = pipeSafe(stdout), pipeSafe(stderr)

	// Signals for the command reach moat (the command has a session of
	// its own, and the sandbox's init a process group of its own), and
	// moat forwards them. Of Ctrl-C, SIGTERM and SIGHUP, the first is
	// forwarded and the second kills the sandbox. Ctrl-Z stops the command
	// and then moat, and the shell's SIGCONT resumes both; Ctrl-\, SIGUSR1
	// and SIGUSR2 (a server's reload, a runner's dump) are forwarded (the
	// last two, before the handlers are in, are ignored, as the Go runtime
	// does with a signal it has no handler for).
	//
	// The handlers are installed once the run has lasted 50 ms: the first
	// costs the Go runtime two threads and each a round trip to one of
	// them, which a run that ends sooner never needs. Before then a signal
	// has its default effect on moat: SIGINT, SIGTERM, SIGHUP and Ctrl-\
	// end it, and the sandbox with it (init dies with moat), Ctrl-Z stops
	// moat alone (Ctrl-\ by its default action, not the Go runtime's dump:
	// see takeQuit). A run that keeps a record (--report, --json, --audit)
	// takes Ctrl-C, Ctrl-\, SIGTERM and SIGHUP at once instead, before it reads
	// its policy: until forwarding starts they kill the sandbox (a command
	// that has barely started is not asked to clean up), and the run ends
	// with its report and audit record however early they came. So does a
	// run with a cgroup limit, from the moment it has read its policy.
	//
	// A signal moat was started with ignored (nohup moat run, a shell's
	// trap '' HUP) stays ignored, by moat and by the command, which
	// inherits it as it would from any parent: moat never handles it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 8)
	fwd := make(chan os.Signal, 8)
	notify := func(list ...os.Signal) {
		list = slices.DeleteFunc(list, signal.Ignored)
		if len(list) > 0 {
			signal.Notify(sigs, list...)
		}
	}
	// Ctrl-\ (SIGQUIT) has its default action until moat takes it (its
	// default effect in a Go program is the runtime's dump of its
	// goroutines): takeQuit asks for it, then gives the runtime its
	// handler back, so that it is never without one of the two.
	restoreQuit := func() {}
	if !signal.Ignored(syscall.SIGQUIT) {
		restoreQuit = quitDefault()
	}
	var quitTaken sync.Once
	takeQuit := func() {
		quitTaken.Do(func() {
			notify(syscall.SIGQUIT)
			restoreQuit()
		})
	}
	if f.reportFile != "" || f.jsonOut || f.auditFile != "" {
		notify(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		takeQuit()
	}
	defer func() {
		// What is left of moat's work after the run ends by SIGQUIT's
		// default action too, not by the dump: set before the handler
		// stops taking it.
		if !signal.Ignored(syscall.SIGQUIT) {
			quitDefault()
		}
		signal.Stop(sigs)
	}()
	var forwarding atomic.Bool
	// begun says that the run's set-up (a copy of the workspace, the
	// questions about the line) is over and the sandbox is being made: a
	// signal before then ends the run, as one before the handlers are in
	// does, rather than waiting for the command to be forwarded to it
	// (found by a tester: a SIGTERM during a long copy reached the command
	// once it started, reported as the command's own).
	var begun atomic.Bool
	// Once: the timer's call and onTerminal's may overlap, and the second
	// must not return before the first has installed the handlers (Do
	// waits for it), or the terminal could go raw with none in place.
	var installed sync.Once
	install := func() {
		installed.Do(func() {
			notify(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP,
				syscall.SIGTSTP, syscall.SIGCONT,
				syscall.SIGUSR1, syscall.SIGUSR2)
			takeQuit()
			forwarding.Store(true)
		})
	}
	handlers := time.AfterFunc(50*time.Millisecond, install)
	defer handlers.Stop()
	// With a terminal on stdin the backend puts it in raw mode and restores
	// it when the run returns: from then on a signal must not end moat
	// before that, so forwarding starts at once (OnTerminal comes just
	// before the raw mode).
	var approver *ttyApprover
	var asking atomic.Pointer[ttyApprover] // approver, for the signals' goroutine
	onTerminal := func() {
		handlers.Stop()
		install()
		if approver != nil {
			approver.relayed.Store(true)
		}
	}
	go func() {
		n := 0
		for s := range sigs {
			switch s {
			case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP:
				// A question on the terminal is answered no, and
				// the signal then goes where it would have gone: a
				// question before the command starts kept it waiting
				// (forwarded, it waits for a command that may never
				// start) until the ask's own timeout.
				if a := asking.Load(); a != nil {
					a.interrupt(s)
				}
				if n++; n >= 2 || !forwarding.Load() || !begun.Load() {
					cancel()
					return
				}
			case syscall.SIGQUIT:
				// Taken before forwarding starts (a run that keeps a
				// record), it ends the run as SIGTERM does.
				if !forwarding.Load() || !begun.Load() {
					cancel()
					return
				}
			case syscall.SIGTSTP:
				// The command's process group is orphaned (its session
				// is its own), and the kernel discards SIGTSTP for such a
				// group: it gets SIGSTOP. moat stops only once that has
				// been passed on.
				b := make(backend.Barrier)
				fwd <- syscall.SIGSTOP
				fwd <- b
				select {
				case <-b:
				case <-ctx.Done():
					return
				}
				syscall.Kill(os.Getpid(), syscall.SIGSTOP)
				continue
			case syscall.SIGUSR1, syscall.SIGUSR2:
				// Dropped rather than queued when the backend is not
				// reading: a command's periodic signals must not hold
				// up a Ctrl-C behind them.
				select {
				case fwd <- s:
				default:
				}
				continue
			}
			fwd <- s
		}
	}()

	p, err := f.loadPolicy(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "moat: %v\n", err)
		failedReport(f, cmdline, err, stdout, stderr)
		return exitMoatError
	}
	// A run with a cgroup limit takes them at once too, before its cgroup
	// is made: ended by their default action, moat could not remove the
	// cgroup, which would stay behind (empty) until a later run swept it.
	if l := p.Limits; l.Memory > 0 || l.Pids > 0 || l.CPUs > 0 {
		notify(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		takeQuit()
	}
	caller, err := f.caller(p)
	if err != nil {
		fmt.Fprintf(stderr, "moat: %v\n", err)
		failedReport(f, cmdline, err, stdout, stderr)
		return exitMoatError
	}

	var auditFn func(egress.Event)
	var aw *sandbox.RunAudit
	var auditErr func() error
	if f.auditFile != "" {
		w, err := audit.Open(f.auditFile)
		if err != nil {
			fmt.Fprintf(stderr, "moat: %v\n", err)
			failedReport(f, cmdline, err, stdout, stderr)
			return exitMoatError
		}
		// The command chooses how many records it makes: the stream's
		// rate is bounded (sandbox.RunAudit). A failed write is said at
		// once: the stream stops there, and what the rules decide is
		// refused from then on (req.AuditDecision).
		var failed sync.Once
		said := func(err error) {
			failed.Do(func() {
				fmt.Fprintf(stderr, "moat: --audit %s: %v: the records after it are lost, and the actions the policy's rules decide are refused until the run ends\n", f.auditFile, err)
			})
		}
		aw = sandbox.NewRunAudit(func(rec any) {
			if err := w.Write(rec); err != nil && w.Err() != nil {
				said(err)
			}
		}, f.auditRate, f.auditBurst)
		auditErr = w.Err
		defer func() {
			aw.Close()
			if err := w.Close(); err != nil {
				said(err)
			}
		}()
		auditFn = func(e egress.Event) { aw.Write(sandbox.NetworkRecord(e)) }
	}

	// The report file is opened now, before the command runs, and written
	// through this descriptor: the command may write where it goes (the
	// workspace), and a link it put there would lead moat's write, by
	// name after the run and with moat's rights, to any file. For the same
	// reason a link on its path, which an earlier run may have made, is
	// refused rather than followed (audit.OpenFile). A path that cannot be
	// written is refused before anything runs, as --audit's is.
	var reportOut *os.File
	if f.reportFile != "" {
		if reportOut, err = openReport(f.reportFile); err != nil {
			fmt.Fprintf(stderr, "moat: --report: %v\n", err)
			return exitMoatError
		}
		defer reportOut.Close()
	}

	req := &sandbox.Request{
		Audit:         auditFn,
		Policy:        p,
		Caller:        caller,
		Args:          cmdline,
		Session:       f.session,
		AllowDegraded: f.allowDegraded,
		Learn:         f.learn,
		ExitAfter:     exitAfterRun,
	}
	for _, f := range []string{f.auditFile, f.reportFile} {
		if f != "" {
			req.RecordFiles = append(req.RecordFiles, f)
		}
	}
	if approver = newTTYApprover(); approver != nil {
		asking.Store(approver)
		req.Approver = approver
		defer approver.Close()
		// The command's output to a terminal waits while a question is
		// on the terminal (where it could redraw it), unless the backend
		// relays the terminal through a pty: no question is asked then,
		// and the backend needs the files themselves to tell a terminal.
		// Output to a pipe or a file is not held (approver.gated).
		if !relaysTerminal(stdin) {
			stdout, stderr = approver.gated(stdout), approver.gated(stderr)
		}
	}
	if aw != nil {
		req.AuditDecision = func(d audit.Decision) error {
			aw.Write(d)
			return auditErr()
		}
	}
	// What runs degraded is said before the command starts, loudly, and
	// not again after it (a run of hours had no bound, and no word of it
	// until the end).
	said := map[string]bool{}
	req.BeforeStart = func(rep *sandbox.Report) {
		begun.Store(true)
		for _, d := range rep.Degraded {
			if !said[d] {
				said[d] = true
				fmt.Fprintf(stderr, "moat: WARNING: running degraded: %s\n", workspace.EscapeText(d))
			}
		}
	}
	var tail *lineTail
	if f.jsonOut {
		// Output to one file (2>&1) stays one writer, its lines in the
		// order written (backend.Stdio.OneOutput).
		one := sandbox.OneFile(stdout, stderr)
		tail = &lineTail{}
		stdout = tail.wrap(stdout, true)
		if one {
			stderr = stdout
		} else {
			stderr = tail.wrap(stderr, false)
		}
	}
	rep, runErr := sandbox.Run(ctx, req, backend.Stdio{Stdin: stdin, Stdout: stdout, Stderr: stderr, Signals: fwd, OnTerminal: onTerminal})

	if aw != nil {
		for _, rec := range rep.AuditRecords(runErr) {
			aw.Write(rec)
		}
	}
	for _, w := range rep.Warnings {
		if !said[w] {
			fmt.Fprintf(stderr, "moat: WARNING: %s\n", workspace.EscapeText(w)) // may quote a path
		}
	}
	// An expected fallback (clone3 answered ENOSYS, which libc then does
	// with clone) changed nothing: it stays in the report and the audit
	// stream, and stderr keeps to what may have changed the outcome.
	var parts, refused, dropped []string
	for _, d := range rep.Denials {
		if d.Layer == sandbox.LayerRules {
			refused = append(refused, fmt.Sprintf("%s ×%d (%s)", d.What, d.Count, d.Rule))
			continue
		}
		if d.Layer == backend.LayerTerminal {
			dropped = append(dropped, fmt.Sprintf("%s ×%d", d.What, d.Count))
			continue
		}
		if d.Layer == backend.LayerMount {
			continue // the run's reason says it (summary)
		}
		if d.Fallback == "" {
			part := fmt.Sprintf("%s ×%d (%s", d.What, d.Count, d.Errno)
			if d.Rule != "" {
				part += ": " + d.Rule
			}
			parts = append(parts, part+")")
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(stderr, "moat: seccomp profile %q refused: %s\n", rep.Seccomp, firstOf(parts, maxListed))
	}
	if len(refused) > 0 {
		fmt.Fprintf(stderr, "moat: the rules refused to start: %s\n", workspace.EscapeText(firstOf(refused, maxListed)))
	}
	if len(dropped) > 0 {
		fmt.Fprintf(stderr, "moat: dropped from the output to the terminal: %s (pipe the output to see it as written)\n", workspace.EscapeText(firstOf(dropped, maxListed)))
	}
	if n := rep.Network; n != nil && n.Summary != "" {
		fmt.Fprintf(stderr, "moat: %s\n", workspace.EscapeText(n.Summary)) // names the command sent
	}
	// What ran degraded, when the run went through: one refused (a
	// protection the backend cannot give even degraded) says why in its
	// error, and the report keeps the list. One the warnings above
	// already said is not said twice.
	if runErr == nil {
		for _, d := range rep.Degraded {
			if !slices.Contains(rep.Warnings, d) && !said[d] {
				fmt.Fprintf(stderr, "moat: WARNING: running degraded: %s\n", d)
			}
		}
	}
	if runErr != nil {
		// It may name a path the command made (a quarantine's).
		fmt.Fprintf(stderr, "moat: %s\n", workspace.EscapeMessage(runErr.Error()))
	} else if rep.Reason != "exit" && !brokenPipe(rep.Reason, deref(rep.Signal)) {
		fmt.Fprintf(stderr, "moat: %s\n", summary(rep, p))
	} else if len(rep.LimitsHit) > 0 {
		// The command went on past a limit that killed or refused one of
		// its processes, and ended as it chose: still said.
		fmt.Fprintf(stderr, "moat: during the run it hit %s; the command went on and exited with status %d\n", limitsHitText(rep.LimitsHit, p), rep.ExitCode)
	}
	if cs := rep.ChangeSet; cs != nil && runErr == nil {
		name := cs.ID
		if cs.Session != "" {
			name = cs.Session
		}
		fmt.Fprintf(stderr, "moat: changes kept in change set %s: review with `moat diff %s`, then `moat apply %s` or `moat discard %s`\n", name, name, name, name)
	}
	if reportOut != nil {
		if err := writeReport(reportOut, rep); err != nil {
			fmt.Fprintf(stderr, "moat: write report: %v\n", err)
		}
	}
	if f.jsonOut {
		b, _ := json.Marshal(rep)
		b = workspace.JSONControls(b)
		fmt.Fprintf(stdout, "%s%s\n", tail.sep(), b)
	}
	return cutStatus(rep.Reason, rep.Budget, rep.ExitCode)
}

// lineTail tells whether what a run wrote to moat's stdout ended a line,
// so that --json's report starts on a line of its own without a blank
// line before it. Only stdout's writer counts (moat's own lines on
// stderr end theirs), and stderr's where it is the same file. A terminal
// is not wrapped (the backend relays it through a pty, and must see the
// file to tell it); output there, unseen, gets a newline before the
// report as before.
type lineTail struct {
	mu      sync.Mutex
	unseen  bool // stdout was passed unwrapped
	pending bool // the last byte written to stdout was not a newline
}

// wrap wraps w, which is stdout when counts.
func (t *lineTail) wrap(w io.Writer, counts bool) io.Writer {
	if isTerminal(w) {
		t.unseen = t.unseen || counts
		return w
	}
	if !counts {
		return w
	}
	return &tailWriter{w: w, t: t}
}

// sep is what goes before the report: a newline where a line is open.
func (t *lineTail) sep() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.unseen || t.pending {
		return "\n"
	}
	return ""
}

type tailWriter struct {
	w io.Writer
	t *lineTail
}

// Unwrap is the writer under it: output to a terminal is filtered
// (backend.Stdio), and the filter finds the terminal through it.
func (w *tailWriter) Unwrap() io.Writer { return w.w }

func (w *tailWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if n > 0 {
		w.t.mu.Lock()
		w.t.pending = p[n-1] != '\n'
		w.t.mu.Unlock()
	}
	return n, err
}

// cutStatus is moat's exit status for a command that ended with reason
// (and, for reason "budget", the budget that ended it) and status code:
// a run whose output the limit or the output budget cut, or that the
// wall-clock limit ended, never exits 0, so that a script does not take
// the cut output, or a run moat says it killed, for a whole one. Whether
// the command was still alive when moat killed it for the limit is a race;
// one that had already ended with 0 gets 137, as if the kill had come
// first. The report keeps the command's own status.
func cutStatus(reason, budget string, code int) int {
	if code == 0 && (reason == "output" || reason == "timeout" || reason == "budget" && budget == "output") {
		return 137
	}
	return code
}

// maxListed bounds the refusals a line of moat's stderr names: the
// report lists them all (a command refused thousands of programs, and
// the line was megabytes).
const maxListed = 20

// firstOf joins the first n of list, saying how many more there are.
func firstOf(list []string, n int) string {
	if len(list) <= n {
		return strings.Join(list, "; ")
	}
	return fmt.Sprintf("%s; and %d more (the report has them)", strings.Join(list[:n], "; "), len(list)-n)
}

// brokenPipe says whether a command died of SIGPIPE, which a shell does
// not remark on either: the reader of its output went away (… | head).
// The exit status (141) and the report still say it.
func brokenPipe(reason, signal string) bool {
	return reason == "signal" && signal == "SIGPIPE"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// summary is the one-line human account of a run that did not simply end.
func summary(r *sandbox.Report, p *policy.Policy) string {
	sig := ""
	if r.Signal != nil {
		sig = " (" + *r.Signal + ")"
	}
	switch r.Reason {
	case "timeout":
		return fmt.Sprintf("killed: wall-clock limit of %s reached (raise with --wall)", p.Limits.Wall)
	case "cpu":
		if r.Signal == nil {
			return fmt.Sprintf("command failed (exit %d) after the CPU-time limit of %s killed one of its processes (raise with --cpu-time)", r.ExitCode, p.Limits.CPU)
		}
		return fmt.Sprintf("killed%s: CPU-time limit of %s reached (raise with --cpu-time)", sig, p.Limits.CPU)
	case "memory":
		if r.Signal == nil {
			// The kernel killed a process of the command, which went on
			// and exited by itself.
			return fmt.Sprintf("command failed (exit %d) after the memory limit of %s was reached (raise with --memory)", r.ExitCode, p.Limits.Memory)
		}
		return fmt.Sprintf("killed%s: memory limit of %s reached (raise with --memory)", sig, p.Limits.Memory)
	case "pids":
		return fmt.Sprintf("command failed (exit %d%s) after the process limit of %d refused forks (raise with --pids)", r.ExitCode, sig, p.Limits.Pids)
	case "output":
		if r.Signal == nil {
			// The command ended on its own as moat went to kill it.
			return fmt.Sprintf("output limit of %s reached: what the command wrote past it was dropped; it exited with status %d%s (raise with --output)", p.Limits.Output, r.ExitCode, cutNote(r.ExitCode))
		}
		return fmt.Sprintf("killed: output limit of %s reached (raise with --output)", p.Limits.Output)
	case "file_size":
		if r.Signal == nil {
			return fmt.Sprintf("command failed (exit %d) after the file-size limit of %s was reached (raise with --file-size)", r.ExitCode, p.Limits.FileSize)
		}
		return fmt.Sprintf("killed%s: file-size limit of %s reached (raise with --file-size)", sig, p.Limits.FileSize)
	case "disk":
		return fmt.Sprintf("command failed (exit %d%s) after the disk limit of %s was reached (raise with --disk)", r.ExitCode, sig, p.Limits.Disk)
	case "killed":
		return "killed: the run was interrupted"
	case "protection":
		var paths []string
		for _, d := range r.Denials {
			if d.Layer == backend.LayerMount {
				paths = append(paths, d.What)
			}
		}
		return "killed: " + protectionLost(paths)
	case "signal":
		return fmt.Sprintf("command died of signal%s", sig)
	case sandbox.ReasonBudget:
		return fmt.Sprintf("ended: the %s budget is spent (raise it in the policy's [budgets])", r.Budget)
	case sandbox.ReasonSeccompKill:
		return fmt.Sprintf("command killed by the seccomp profile %q (SIGSYS): it made a system call the profile kills or traps on (SCMP_ACT_KILL*, SCMP_ACT_TRAP)", r.Seccomp)
	}
	return "run ended: " + r.Reason
}

// protectionLost says which protection went (the report's denials of
// the mount layer name it) and why the command was stopped.
func protectionLost(paths []string) string {
	what := "a protected path"
	if len(paths) > 0 {
		what = workspace.EscapeText(paths[0])
	}
	return what + " was replaced or removed on the host while the command ran, and its protection in the sandbox went with it; the command may have written the new file in the moment before it was stopped: review it before git or anything else on the host reads it (a new sandbox protects the file now there)"
}

// limitsHitText names the limits a run hit, with their values and flags:
// "the memory limit of 64MiB (--memory)".
func limitsHitText(hit []string, p *policy.Policy) string {
	var out []string
	for _, h := range hit {
		switch h {
		case "memory":
			out = append(out, fmt.Sprintf("the memory limit of %s (--memory), and the kernel killed a process of it", p.Limits.Memory))
		case "pids":
			out = append(out, fmt.Sprintf("the process limit of %d (--pids), which refused forks", p.Limits.Pids))
		case "cpu":
			out = append(out, fmt.Sprintf("the CPU-time limit of %s (--cpu-time), which killed a process of it", p.Limits.CPU))
		case "file_size":
			out = append(out, fmt.Sprintf("the file-size limit of %s (--file-size), which cut a write", p.Limits.FileSize))
		case "disk":
			out = append(out, fmt.Sprintf("the disk limit of %s (--disk), which failed a write", p.Limits.Disk))
		default:
			out = append(out, "the "+h+" limit")
		}
	}
	return strings.Join(out, "; ")
}

// openReport opens the --report file. The command may write where it
// goes (the workspace), and a link it put there would lead moat's write,
// by name after the run and with moat's rights, to any file; so a link on
// its path, which an earlier run may have made, is refused rather than
// followed (audit.OpenFile). O_NONBLOCK: a fifo planted there would hold
// the open, which no signal ends, until something read it; anything but
// a regular file is refused.
func openReport(path string) (*os.File, error) {
	f, err := audit.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err == nil {
		if fi, serr := f.Stat(); serr != nil || !fi.Mode().IsRegular() {
			f.Close()
			err = fmt.Errorf("%s is not a regular file; remove it or name another file", path)
		}
	}
	if errors.Is(err, syscall.ENXIO) {
		err = fmt.Errorf("%s is not a regular file; remove it or name another file", path)
	}
	return f, err
}

// failedReport writes, when the command line names a --report file, the
// report of a run refused before it began: a report an earlier run left
// there must not be read for this one's.
func failedReport(f *runFlags, cmdline []string, err error, stdout, stderr io.Writer) {
	if f.jsonOut {
		b, _ := json.Marshal(sandbox.FailedReport(cmdline, err))
		b = workspace.JSONControls(b)
		fmt.Fprintf(stdout, "%s\n", b) // nothing ran: the first line
	}
	if f.reportFile == "" {
		return
	}
	out, oerr := openReport(f.reportFile)
	if oerr != nil {
		fmt.Fprintf(stderr, "moat: --report: %v\n", oerr)
		return
	}
	defer out.Close()
	if werr := writeReport(out, sandbox.FailedReport(cmdline, err)); werr != nil {
		fmt.Fprintf(stderr, "moat: write report: %v\n", werr)
	}
}

// writeReport replaces the content of f, opened before the run, with r.
func writeReport(f *os.File, r *sandbox.Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(append(b, '\n'), 0)
	return err
}

func cmdPolicy(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "explain" {
		return cmdPolicyExplain(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "check" {
		return cmdPolicyCheck(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "suggest" {
		return cmdPolicySuggest(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "show" {
		fmt.Fprintln(stderr, "usage: moat policy show [run flags] | moat policy explain [--policy FILE] -- CMD... | moat policy check FILE | moat policy suggest AUDIT.jsonl")
		return 2
	}
	f := newRunFlags("policy show")
	f.showOnly = true
	if ok, code := f.parse(args[1:], stdout, stderr); !ok {
		return code
	}
	p, err := f.loadPolicy(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "moat: %v\n", err)
		return exitMoatError
	}
	b, err := p.TOML()
	if err != nil {
		fmt.Fprintf(stderr, "moat: %v\n", err)
		return exitMoatError
	}
	stdout.Write(b)
	return 0
}

// cutNote says, for a command that ended on its own with status code as
// its output was cut, what moat exits with instead (cutStatus).
func cutNote(code int) string {
	if code == 0 {
		return ", and moat exits 137 so that the cut output is not taken for the whole"
	}
	return ""
}
