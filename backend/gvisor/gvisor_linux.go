package gvisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/pipefd"
	"github.com/moatbox/moat/internal/termsafe"
)

// Run runs spec under runsc, one `runsc run` with a bundle of its own,
// and removes the bundle and runsc's state when it ends. The command's
// standard streams pass through pipes moat reads (to count the output);
// a terminal is never handed to runsc, so the command cannot reach the
// caller's. Signals from stdio.Signals go to the command with `runsc
// kill`; the wall and output limits, and ctx, end the run with `runsc
// kill --all`.
func (b *Backend) Run(ctx context.Context, spec *backend.Spec, stdio backend.Stdio) (*backend.ExitStatus, error) {
	if err := refuseExecCheck(stdio); err != nil {
		return nil, err
	}
	start := time.Now()
	c, err := b.prepare(spec, stdio, false)
	if err != nil {
		return nil, err
	}
	defer c.remove()
	if spec.Network.Mode == backend.NetProxy {
		c.cfg.Process.Args = append(append(append([]string{forwardPath}, proxyArgs(spec)...), "--"), spec.Args...)
	}
	if err := c.write(); err != nil {
		return nil, err
	}
	logPath := filepath.Join(c.dir, "runsc.log")
	id := c.id
	runscCmd := func(args ...string) *exec.Cmd { return c.cmd(logPath, args...) }

	// runsc writes the pid file once it has made the sandbox: a run that
	// ends without one never started the command, whatever its status
	// (a binary that is not runsc, named by [sandbox] runsc or
	// $MOAT_RUNSC, exits 0 having done nothing).
	pidFile := filepath.Join(c.dir, "runsc.pid")
	cmd := runscCmd("run", "--pid-file", pidFile, "--bundle", c.bdir, id)
	var outN atomic.Int64
	var once sync.Once
	var cause backend.Cause
	var hit []backend.Cause
	done := make(chan struct{})
	// stop ends the sandbox for why, once: with runsc's own kill, and
	// runsc's process group if the container is not there yet.
	stop := func(why backend.Cause) {
		once.Do(func() {
			cause = why
			if why == backend.CauseTimeout || why == backend.CauseOutput {
				hit = append(hit, why)
			}
			killed := c.checked() && runBounded(runscCmd("kill", "--all", id, "KILL")) == nil
			if !killed && cmd.Process != nil {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		})
	}
	var term termsafe.Set // output to a person's terminal is filtered (see backend.Stdio)
	out := func(w io.Writer) io.Writer {
		if w == nil {
			w = io.Discard
		}
		w = term.Wrap(w)
		return &countWriter{w: w, n: &outN, limit: spec.Limits.OutputBytes, over: func() { go stop(backend.CauseOutput) }}
	}
	cmd.Stdout = out(stdio.Stdout)
	cmd.Stderr = cmd.Stdout // one writer, one pipe (see backend.Stdio)
	if !stdio.OneOutput() {
		cmd.Stderr = out(stdio.Stderr)
	}
	if stdio.Stdin != nil {
		cmd.Stdin = stdio.Stdin
		if f, ok := stdio.Stdin.(*os.File); ok && f != nil && !pipefd.PassablePipe(f, commandUID()) {
			// Read through a pipe: the terminal itself stays out of the
			// sandbox (no TIOCSTI into the caller's shell), and so does
			// any other file, which runsc would give to root and the
			// command could chmod (see internal/pipefd). The copy may
			// outlive the run, blocked on a terminal; exec.Cmd's own
			// copy would hold up Wait for it.
			if pipefd.Anonymous(f) {
				// The caller's own pipe: taken from only as the command
				// reads it, so its shell reads on after moat (see
				// pipefd.LazyPipe).
				r, finish, err := pipefd.LazyPipe(f)
				if err != nil {
					return nil, &backend.InitError{Stage: "stdin", Err: err}
				}
				defer r.Close()
				defer finish()
				cmd.Stdin = r
			} else {
				r, w, err := os.Pipe()
				if err != nil {
					return nil, &backend.InitError{Stage: "stdin", Err: err}
				}
				defer r.Close()
				go func() { io.Copy(w, f); w.Close() }()
				cmd.Stdin = r
			}
		}
	}
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = attrs()
	if afterBundle != nil {
		afterBundle(c.stage)
	}
	if err := c.start(cmd); err != nil {
		return nil, &backend.InitError{Stage: "runsc", Err: err}
	}
	// Whatever happens from here, the container goes: runsc deletes it
	// when `run` returns, and delete --force catches a run cut short (its
	// state is still there then; another runsc call is not free).
	defer c.deleteIfLeft()
	// Watched from before runsc's gofer binds them: a file the host
	// replaced before that is bound as moat opened it.
	var lost atomic.Value
	stopWatch, watchErr := watchProtections(c.watched, func(path string) {
		lost.CompareAndSwap(nil, path)
		stop(backend.CauseProtection)
	})
	if watchErr != nil {
		stop(backend.CauseKilled)
	}
	if stopWatch != nil {
		defer stopWatch()
	}
	go func() {
		var timeout <-chan time.Time
		if spec.Limits.Wall > 0 {
			t := time.NewTimer(spec.Limits.Wall)
			defer t.Stop()
			timeout = t.C
		}
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				stop(backend.CauseKilled)
				return
			case <-timeout:
				stop(backend.CauseTimeout)
				return
			case s, ok := <-stdio.Signals:
				if !ok {
					stdio.Signals = nil
					continue
				}
				if bar, isBarrier := s.(backend.Barrier); isBarrier {
					close(bar)
					continue
				}
				if sig, isSys := s.(syscall.Signal); isSys {
					// Off this loop: while runsc still makes the sandbox a
					// kill waits for it, and a second signal, or the
					// wall limit, must still be seen.
					go runBounded(runscCmd("kill", id, fmt.Sprint(int(sig))))
				}
			}
		}
	}()
	werr := cmd.Wait()
	close(done)
	st := &backend.ExitStatus{Wall: time.Since(start), OutputBytes: backend.Delivered(outN.Load(), spec.Limits.OutputBytes)}
	st.Denials = backend.TerminalDenials(term.Close())
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			// runsc's own usage and its children's: the sentry and the
			// gofer, which do the command's work.
			st.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			st.MaxMemory = ru.Maxrss * 1024
		}
	}
	once.Do(func() {}) // no stop after this point
	if watchErr != nil {
		return nil, &backend.InitError{Stage: "watch the protections", Err: watchErr}
	}
	var oom int64
	if c.cg != nil {
		if s, err := c.cg.Stats(); err == nil {
			oom = s.OOMKills
			st.MaxMemory = s.MemoryPeak
		}
	}
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	if oom > 0 && cause == "" {
		// The OOM killer ended a process of the sandbox's (the sentry,
		// and the whole sandbox with it, or the gofer).
		st.ExitCode, st.Signal, st.Cause = -1, int(syscall.SIGKILL), backend.CauseMemory
		st.LimitsHit = append(st.LimitsHit, backend.CauseMemory)
		return st, nil
	}
	if code == -1 && cause == "" {
		return nil, &backend.InitError{Stage: "runsc", Err: fmt.Errorf("runsc ended abnormally: %v", werr)}
	}
	if code == 128 && cause == "" {
		if err := runscFailure(logPath); err != nil {
			return nil, err
		}
	}
	if cause == "" {
		if b, err := os.ReadFile(pidFile); err != nil || len(bytes.TrimSpace(b)) == 0 {
			return nil, &backend.InitError{Stage: "runsc", Err: fmt.Errorf("%s exited %d without starting the sandbox (it wrote no --pid-file): is it gVisor's runsc? Name runsc with [sandbox] runsc or $MOAT_RUNSC, or build it with scripts/runsc.sh", c.exe, code)}
		}
	}
	st.ExitCode, st.Cause = code, backend.CauseExit
	// runsc reports a command killed by signal N as 128+N, as a shell
	// does; moat reads it back the same way.
	if code > 128 && code < 128+65 {
		st.ExitCode, st.Signal, st.Cause = -1, code-128, backend.CauseSignal
		// runsc's CPU time is not the command's (its sandbox's runs in
		// processes runsc does not wait for): without a limit the
		// command raised the signal itself; with one, it is taken as
		// the limit's.
		switch sig := syscall.Signal(st.Signal); {
		case sig == syscall.SIGXCPU && spec.Limits.CPUTime > 0:
			st.Cause = backend.CauseCPU
			st.LimitsHit = append(st.LimitsHit, backend.CauseCPU)
		case spec.Limits.FileSizeHit(sig):
			st.Cause = backend.CauseFile
			st.LimitsHit = append(st.LimitsHit, backend.CauseFile)
		}
	}
	if cause != "" {
		st.Cause = cause
		st.LimitsHit = append(st.LimitsHit, hit...)
		if code == -1 || st.Signal == 0 {
			st.ExitCode, st.Signal = -1, int(syscall.SIGKILL)
		}
	}
	if path, ok := lost.Load().(string); ok && cause == backend.CauseProtection {
		st.Denials = append(st.Denials, backend.ProtectionLost(path))
	}
	return st, nil
}

// removeRunDir removes a run's directory: its bundle, runsc's state, the
// empty network namespace runsc pins there for its gofers with a bind
// mount (and leaves for the next container of the same root: this root
// has no next), and its overlay workspaces' mounts, unmounted first.
// killBound bounds a runsc kill: one that waits on a sandbox runsc is
// still making (its state locked) must not keep moat from ending the run
// another way (runsc's process group).
const killBound = 3 * time.Second

// runBounded runs cmd, a runsc kill, for at most killBound: past it, it
// is killed and an error returned.
func runBounded(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t := time.NewTimer(killBound)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not end within %v", cmd.Path, killBound)
	}
}

// afterBundle, for tests, runs once the bundle is written and before
// runsc starts: the moment a path it names could be swapped. It is given
// the directory of the staged sources' mount points ("" when none).
var afterBundle func(stage string)

func removeRunDir(dir string) {
	unmountOverlays(dir)
	for unix.Unmount(filepath.Join(dir, "state", "null-netns"), unix.MNT_DETACH) == nil {
	}
	os.RemoveAll(dir)
}

// sweep removes what runs and sessions of moats that died without
// cleaning up left, where their reapers (reap_linux.go) could not: the
// directory of each whose moat, named by the pid in the directory's
// name, is gone, with its mounts and its cgroup. runsc itself dies with
// its moat (Pdeathsig), and the sandbox with runsc; a container whose
// state is still there is deleted with runsc first, in case its sandbox
// lives.
func sweep(runsc string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "moat-gvisor-*-*"))
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(d), "moat-gvisor-%d-", &pid); err != nil || pid <= 0 {
			continue
		}
		if syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		reapDir(d, runsc)
	}
}

// runscFailure reads why runsc failed from its log: runsc exits 128 then,
// with the error logged at level "error". nil when the log has no error,
// so that a command's own exit status 128 stays one.
func runscFailure(logPath string) error {
	log, _ := os.ReadFile(logPath)
	var why string
	for _, line := range bytes.Split(log, []byte("\n")) {
		var e struct{ Msg, Level string }
		if json.Unmarshal(line, &e) == nil && e.Level == "error" {
			why = e.Msg
		}
	}
	if why == "" {
		return nil
	}
	err := errors.New(why)
	// "creating process: failed to load CMD: no such file or directory"
	if strings.Contains(why, "failed to load") || strings.Contains(why, "executable") {
		switch {
		case strings.Contains(why, "no such file or directory"), strings.Contains(why, "not found"):
			err = fmt.Errorf("%w: %s", backend.ErrNotFound, why)
		case strings.Contains(why, "permission denied"), strings.Contains(why, "exec format error"):
			err = fmt.Errorf("%w: %s", backend.ErrNotExecutable, why)
		}
	}
	return &backend.InitError{Stage: "runsc", Err: err}
}

// countWriter counts what the command writes and calls over once the
// total passes limit (0: no limit); what is past the limit is dropped.
type countWriter struct {
	w     io.Writer
	n     *atomic.Int64
	limit int64
	over  func()
}

func (c *countWriter) Write(p []byte) (int, error) {
	n := c.n.Add(int64(len(p)))
	if c.limit > 0 && n > c.limit {
		keep := int64(len(p)) - (n - c.limit)
		if keep > 0 {
			c.w.Write(p[:keep])
		}
		if n-int64(len(p)) <= c.limit {
			c.over()
		}
		return len(p), nil
	}
	return c.w.Write(p)
}

// commandUID is the host uid whose pipes a command could reopen
// (pipefd.PassablePipe): the caller's; -1 for root, whose sandboxes run
// as no uid that makes the caller's pipes.
func commandUID() int {
	if uid := os.Geteuid(); uid != 0 {
		return uid
	}
	return -1
}
