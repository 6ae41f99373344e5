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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/pipefd"
	"github.com/moatbox/moat/internal/pty"
)

// ErrEnded is returned (wrapped) by Exec on an instance that has ended.
var ErrEnded = errors.New("sandbox has ended")

// Create implements backend.Lifecycle: one `runsc run` of a container
// built from spec exactly as a one-shot run's is (prepare), whose first
// process is moat's own binary bound in read-only, holding the container
// open (hold) as a user of its own. Each command is then a `runsc exec`
// into it with the sandbox user, no capabilities and no_new_privs; the
// sentry gives it the container's seccomp filter and rlimits, and a
// session and process group of its own. `runsc run` stays moat's child:
// it dies with moat (Pdeathsig) and the sandbox with it, and its end is
// the sandbox's (Done).
func (b *Backend) Create(ctx context.Context, spec *backend.Spec, stdio backend.Stdio) (_ backend.Instance, err error) {
	if err := refuseExecCheck(stdio); err != nil {
		return nil, err
	}
	// Wall and output are limits of each process (ProcessSpec), not of
	// the sandbox.
	sp := *spec
	sp.Limits.Wall, sp.Limits.OutputBytes = 0, 0
	c, err := b.prepare(&sp, backend.Stdio{ServeProxy: stdio.ServeProxy}, true)
	if err != nil {
		return nil, err
	}
	in := &instance{c: c, spec: &sp, done: make(chan struct{}), anchorDone: make(chan struct{}), procs: map[*process]struct{}{}}
	started := false
	defer func() {
		if err != nil {
			if started {
				in.end()
			} else {
				c.remove()
			}
		}
	}()
	uid, gid := holdID(sp.User)
	c.cfg.Process.Args = append([]string{forwardPath, holdFlag}, proxyArgs(&sp)...)
	c.cfg.Process.User = specs.User{UID: uid, GID: gid}
	c.cfg.Process.Env = []string{"PATH=/.moat"}
	c.cfg.Process.Cwd = "/"
	if err := c.write(); err != nil {
		return nil, err
	}
	ready, w, err := os.Pipe()
	if err != nil {
		return nil, &backend.InitError{Stage: "runsc", Err: err}
	}
	defer ready.Close()
	logPath := filepath.Join(c.dir, "runsc.log")
	cmd := c.cmd(logPath, "run", "--bundle", c.bdir, c.id)
	cmd.Stdout = w
	cmd.Stderr = &in.anchorErr
	cmd.SysProcAttr = attrs()
	cmd.WaitDelay = time.Second
	err = c.start(cmd)
	w.Close()
	if err != nil {
		return nil, &backend.InitError{Stage: "runsc", Err: err}
	}
	in.anchor, started = cmd, true
	go func() {
		cmd.Wait()
		close(in.anchorDone)
		in.end()
	}()
	// Watched from before runsc's gofer binds them (protectwatch_linux.go).
	stopWatch, err := watchProtections(c.watched, func(path string) {
		in.lost.CompareAndSwap(nil, path)
		go in.end()
	})
	if err != nil {
		return nil, &backend.InitError{Stage: "watch the protections", Err: err}
	}
	in.stopWatch = stopWatch
	line := make(chan string, 1)
	go func() {
		b := make([]byte, len(holdReady))
		n, _ := io.ReadFull(ready, b)
		line <- string(b[:n])
	}()
	select {
	case l := <-line:
		if l == holdReady {
			return in, nil
		}
		<-in.anchorDone
		if err := runscFailure(logPath); err != nil {
			return nil, err
		}
		return nil, &backend.InitError{Stage: "runsc", Err: fmt.Errorf("the sandbox ended before it was ready: %s", strings.TrimSpace(in.anchorErr.String()))}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// holdID is the user and group of a session's init: nobody's, or, when
// the sandbox user is nobody, the ids below it. Its processes are then
// not the commands' to signal.
func holdID(u backend.Identity) (uid, gid uint32) {
	uid, gid = 65534, 65534
	if u.UID == 65534 {
		uid = 65533
	}
	if u.GID == 65534 {
		gid = 65533
	}
	return uid, gid
}

// instance is a live session sandbox (backend.Instance).
type instance struct {
	c          *container
	spec       *backend.Spec
	anchor     *exec.Cmd // runsc run
	anchorErr  syncBuffer
	anchorDone chan struct{}
	next       atomic.Int64 // names each exec's files

	mu    sync.Mutex // procs, ended, oom
	procs map[*process]struct{}
	ended bool
	oom   bool // the OOM killer ended the sandbox

	endOnce sync.Once
	done    chan struct{}
	// lost is the path of the protection whose going ended the sandbox
	// (backend.CauseProtection); stopWatch ends its watch.
	lost      atomic.Value
	stopWatch func()
}

// end tears the sandbox down, once: runsc deletes the container (which
// kills every process in it), `runsc run` and every `runsc exec` are
// waited for (and killed if they linger), then the container's directory
// goes.
func (in *instance) end() {
	in.endOnce.Do(func() {
		oom := false
		if cg := in.c.cg; cg != nil {
			s, err := cg.Stats()
			oom = err == nil && s.OOMKills > 0
		}
		in.mu.Lock()
		in.ended, in.oom = true, oom
		procs := make([]*process, 0, len(in.procs))
		for p := range in.procs {
			procs = append(procs, p)
		}
		in.mu.Unlock()
		select {
		case <-in.anchorDone:
		default:
			if in.c.checked() {
				in.c.cmd(os.DevNull, "delete", "--force", in.c.id).Run()
			} else {
				syscall.Kill(-in.anchor.Process.Pid, syscall.SIGKILL)
			}
		}
		t := time.NewTimer(10 * time.Second)
		select {
		case <-in.anchorDone:
		case <-t.C:
			syscall.Kill(-in.anchor.Process.Pid, syscall.SIGKILL)
			<-in.anchorDone
		}
		t.Stop()
		for _, p := range procs {
			select {
			case <-p.exited:
			case <-time.After(5 * time.Second):
				syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
				<-p.exited
			}
		}
		if in.stopWatch != nil {
			in.stopWatch()
		}
		in.c.deleteIfLeft()
		in.c.remove()
		close(in.done)
	})
}

// Done implements backend.Instance.
func (in *instance) Done() <-chan struct{} { return in.done }

// Destroy implements backend.Instance.
func (in *instance) Destroy(context.Context) error {
	in.end()
	return nil
}

// CPUTime is Stats's CPU without the runsc process Stats runs for the
// rest (backend.CPUCounter).
func (in *instance) CPUTime() time.Duration {
	select {
	case <-in.done:
		return 0
	default:
	}
	return treeCPU(in.anchor.Process.Pid)
}

// Stats implements backend.Instance: memory and tasks from the sentry's
// own accounting (`runsc events --stats`), CPU time from the host's
// /proc over runsc's sandbox and gofer processes, which do every
// command's work (runsc's own CPU figure, without a cgroup of its own,
// is scaled by the host cgroup moat runs in).
func (in *instance) Stats() backend.Stats {
	select {
	case <-in.done:
		return backend.Stats{}
	default:
	}
	st := backend.Stats{CPU: treeCPU(in.anchor.Process.Pid)}
	if !in.c.checked() {
		return st
	}
	out, err := in.c.cmd(os.DevNull, "events", "--stats", in.c.id).Output()
	if err != nil {
		return st
	}
	var ev struct {
		Data struct {
			Memory struct {
				Usage struct{ Usage, Max int64 }
			}
			Pids struct{ Current int64 }
		}
	}
	if json.Unmarshal(out, &ev) == nil {
		d := ev.Data
		st.MemoryBytes, st.MemoryPeak, st.Pids = d.Memory.Usage.Usage, d.Memory.Usage.Max, d.Pids.Current
	}
	return st
}

// treeCPU sums the user and system time of pid and its descendants (and
// of the children they reaped), as the host's /proc gives them.
func treeCPU(pid int) time.Duration {
	const tick = time.Second / 100 // USER_HZ, as /proc counts
	var cpu time.Duration
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 15 {
			continue
		}
		for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseInt(f[k], 10, 64)
			cpu += time.Duration(v) * tick
		}
		threads, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		for _, th := range threads {
			c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, th.Name()))
			for _, w := range strings.Fields(string(c)) {
				if child, err := strconv.Atoi(w); err == nil {
					todo = append(todo, child)
				}
			}
		}
	}
	return cpu
}

// process is one command of a session (backend.Process): a `runsc exec`
// that lasts as long as the command.
type process struct {
	in      *instance
	spec    *backend.ProcessSpec
	cmd     *exec.Cmd
	logPath string
	pid     int // inside the sandbox: the command's process group too
	start   time.Time
	started time.Time
	exited  chan struct{}
	killed  atomic.Value
	output  atomic.Int64

	copies  sync.WaitGroup
	readers []*os.File // the host's ends of the outputs (or the pty)
	tty     *os.File   // the pty's master

	waitOnce sync.Once
	status   *backend.ExitStatus
}

// Exec implements backend.Instance.
func (in *instance) Exec(ctx context.Context, ps *backend.ProcessSpec, stdio backend.Stdio) (_ backend.Process, err error) {
	if err := refuseExecCheck(stdio); err != nil {
		return nil, err
	}
	if len(ps.Args) == 0 {
		return nil, errors.New("no command given")
	}
	select {
	case <-in.done:
		return nil, ErrEnded
	default:
	}
	if in.c.check != nil {
		if err := in.c.check(in.c.runsc); err != nil {
			return nil, &backend.InitError{Stage: "runsc exec", Err: err}
		}
	}
	dir := ps.Dir
	if dir == "" {
		dir = "/"
	}
	n := in.next.Add(1)
	base := filepath.Join(in.c.dir, fmt.Sprintf("exec%d", n))
	p := &process{in: in, spec: ps, start: time.Now(), exited: make(chan struct{}), logPath: base + ".log"}
	u := in.spec.User
	proc := specs.Process{
		Terminal: ps.Tty, Args: ps.Args, Env: ps.Env, Cwd: dir,
		User:            specs.User{UID: uint32(u.UID), GID: uint32(u.GID)},
		Capabilities:    &specs.LinuxCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{}},
		NoNewPrivileges: true,
	}
	data, err := json.Marshal(&proc)
	if err != nil {
		return nil, err
	}
	var files []string
	defer func() {
		// runsc reads the process file before it starts the command;
		// the log is read when the command could not start.
		for _, f := range files {
			os.Remove(f)
		}
	}()
	pj, fifo := base+".json", base+".pid"
	files = append(files, pj, fifo, p.logPath)
	if err := os.WriteFile(pj, data, 0o600); err != nil {
		return nil, err
	}
	// runsc writes the command's pid into a file that is not a regular
	// one in place: a FIFO tells the host the moment the command runs.
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		return nil, err
	}
	// Its own writer keeps the read end from seeing an end of file before
	// runsc has opened it; closed once runsc has exited, it lets a read
	// end on what runsc wrote, or on nothing.
	rfd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	pidR := os.NewFile(uintptr(rfd), "pid")
	defer pidR.Close()
	wfd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	pidW := os.NewFile(uintptr(wfd), "pid-writer")
	defer pidW.Close()

	var child []*os.File // the command's ends, closed once runsc has them
	defer func() {
		for _, f := range child {
			f.Close()
		}
	}()
	cmd := in.c.cmd(p.logPath, "exec", "--process", pj, "--internal-pid-file", fifo, in.c.id)
	cmd.SysProcAttr = attrs()
	var stdin io.Reader
	if ps.Tty {
		master, slave, err := pty.Open(ps.Rows, ps.Cols)
		if err != nil {
			return nil, err
		}
		child = append(child, slave)
		p.tty, p.readers = master, []*os.File{master}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		// runsc exec relays the terminal's SIGWINCH to the command:
		// the pty must be its controlling terminal.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
		stdin = stdio.Stdin
	} else {
		// An anonymous pipe is passed as it is, but no other file (see
		// internal/pipefd), and never a terminal (see backend.Stdio):
		// those are read through a pipe.
		f, isFile := stdio.Stdin.(*os.File)
		switch {
		case isFile && f != nil && pipefd.Anonymous(f): // the daemon's own pipe (see the native backend's session)
			cmd.Stdin = f
		case stdio.Stdin == nil || isFile && f == nil:
		default:
			r, w, err := os.Pipe()
			if err != nil {
				return nil, fmt.Errorf("stdin pipe: %w", err)
			}
			child = append(child, r)
			cmd.Stdin = r
			go func() {
				io.Copy(w, stdio.Stdin)
				w.Close()
			}()
		}
		// One writer for both outputs: one pipe (see backend.Stdio).
		outputs := 2
		if stdio.OneOutput() {
			outputs = 1
		}
		for i := 0; i < outputs; i++ {
			r, w, err := os.Pipe()
			if err != nil {
				p.closeReaders()
				return nil, fmt.Errorf("output pipe: %w", err)
			}
			child = append(child, w)
			p.readers = append(p.readers, r)
		}
		cmd.Stdout, cmd.Stderr = child[len(child)-outputs], child[len(child)-1]
	}
	in.mu.Lock()
	if in.ended {
		in.mu.Unlock()
		p.closeReaders()
		return nil, ErrEnded
	}
	if err := cmd.Start(); err != nil {
		in.mu.Unlock()
		p.closeReaders()
		return nil, &backend.InitError{Stage: "runsc exec", Err: err}
	}
	p.cmd = cmd
	in.procs[p] = struct{}{}
	in.mu.Unlock()
	for _, f := range child {
		f.Close()
	}
	child = nil
	go func() {
		cmd.Wait()
		in.mu.Lock()
		delete(in.procs, p)
		in.mu.Unlock()
		close(p.exited)
	}()
	pid := make(chan int, 1)
	go func() {
		b := make([]byte, 32)
		n, _ := pidR.Read(b)
		v, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
		pid <- v
	}()
	select {
	case p.pid = <-pid:
	case <-p.exited:
		pidW.Close()
		p.pid = <-pid
	}
	if p.pid <= 0 {
		<-p.exited
		p.closeReaders()
		if err := runscFailure(p.logPath); err != nil {
			return nil, err
		}
		select {
		case <-in.done:
			return nil, ErrEnded
		default:
		}
		return nil, &backend.InitError{Stage: "runsc exec", Err: fmt.Errorf("the command did not start (runsc exited %d)", cmd.ProcessState.ExitCode())}
	}
	p.started = time.Now()
	if ps.Tty {
		p.copies.Add(1)
		go p.copyOut(p.tty, stdio.Stdout)
		if stdin != nil {
			go io.Copy(p.tty, stdin)
		}
	} else {
		p.copies.Add(len(p.readers))
		go p.copyOut(p.readers[0], stdio.Stdout)
		if len(p.readers) == 2 {
			go p.copyOut(p.readers[1], stdio.Stderr)
		}
	}
	go p.watch(ctx)
	return p, nil
}

// watch enforces the wall clock and cancellation on the process.
func (p *process) watch(ctx context.Context) {
	var timer <-chan time.Time
	if w := p.spec.Wall; w > 0 {
		t := time.NewTimer(w - time.Since(p.start))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-p.exited:
	case <-timer:
		p.kill(backend.CauseTimeout)
	case <-ctx.Done():
		p.kill(backend.CauseKilled)
	}
}

// kill ends the process's group for cause; the first cause wins.
func (p *process) kill(cause backend.Cause) {
	if p.killed.CompareAndSwap(nil, cause) {
		p.signal(syscall.SIGKILL)
	}
}

// signal sends s to the command's process group, with runsc.
func (p *process) signal(s syscall.Signal) error {
	out, err := p.in.c.cmd(os.DevNull, "kill", "--pgid", strconv.Itoa(p.pid), p.in.c.id, strconv.Itoa(int(s))).CombinedOutput()
	if err != nil {
		select {
		case <-p.exited:
			return os.ErrProcessDone
		default:
		}
		return fmt.Errorf("runsc kill: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// copyOut copies one output, counting the process's outputs together
// against its limit; past it, the process's group is killed.
func (p *process) copyOut(src io.Reader, dst io.Writer) {
	defer p.copies.Done()
	if dst == nil {
		dst = io.Discard
	}
	cw := &countWriter{w: dst, n: &p.output, limit: p.spec.Output, over: func() { go p.kill(backend.CauseOutput) }}
	io.Copy(cw, src)
}

func (p *process) closeReaders() {
	for _, f := range p.readers {
		f.Close()
	}
}

// drainIdle is how long the outputs of a process that has exited may
// stay empty without ending before they are closed: a process it left in
// the background may hold them open for as long as it lives.
const drainIdle = 20 * time.Millisecond

// Wait implements backend.Process.
func (p *process) Wait() (*backend.ExitStatus, error) {
	p.waitOnce.Do(func() {
		<-p.exited
		copied := make(chan struct{})
		go func() { p.copies.Wait(); close(copied) }()
		idle := 0
		for idle < 2 {
			select {
			case <-copied:
				idle = 2
				continue
			case <-time.After(drainIdle):
			}
			if p.pending() {
				idle = 0
			} else {
				idle++
			}
		}
		p.closeReaders()
		<-copied
		p.status = p.exitStatus()
		os.Remove(p.logPath)
	})
	return p.status, nil
}

// pending reports whether an output still holds unread bytes.
func (p *process) pending() bool {
	for _, f := range p.readers {
		sc, err := f.SyscallConn()
		if err != nil {
			continue
		}
		n := 0
		// TIOCINQ is FIONREAD: the bytes waiting in a pipe or a pty.
		sc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
		if n > 0 {
			return true
		}
	}
	return false
}

// Signal implements backend.Process.
func (p *process) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok || s <= 0 || s >= 65 {
		return fmt.Errorf("signal %v cannot be sent to a sandboxed process", sig)
	}
	select {
	case <-p.exited:
		return os.ErrProcessDone
	default:
	}
	return p.signal(s)
}

// Resize implements backend.Process: the host's pty takes the size, and
// the kernel's SIGWINCH to runsc exec, its controlling process, is
// relayed to the command.
func (p *process) Resize(rows, cols uint16) error {
	if p.tty == nil {
		return errors.New("the process has no terminal")
	}
	sc, err := p.tty.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) {
		serr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	}); err != nil {
		return err
	}
	return serr
}

// exitStatus reads how runsc exec ended: the command's exit code, or
// 128+N for a death by signal N (as for Run). CPU time and memory are
// not known per command under runsc (Stats has the sandbox's).
func (p *process) exitStatus() *backend.ExitStatus {
	st := &backend.ExitStatus{ExitCode: -1, Wall: time.Since(p.start), OutputBytes: backend.Delivered(p.output.Load(), p.spec.Output), Setup: p.started.Sub(p.start)}
	code := p.cmd.ProcessState.ExitCode()
	killed, _ := p.killed.Load().(backend.Cause)
	if code == runscFailed {
		// runsc exec fails so when the sandbox dies under it; the
		// sandbox's end follows at once, and says why.
		select {
		case <-p.in.anchorDone:
			<-p.in.done
		case <-time.After(time.Second):
		}
	}
	p.in.mu.Lock()
	ended, oom := p.in.ended, p.in.oom
	p.in.mu.Unlock()
	if ended && killed == "" {
		// The sandbox ended under the command: killed, or, past its
		// memory limit, by the OOM killer.
		killed = backend.CauseKilled
		if oom {
			killed = backend.CauseMemory
		}
		if path, ok := p.in.lost.Load().(string); ok && !oom {
			killed = backend.CauseProtection
			st.Denials = append(st.Denials, backend.ProtectionLost(path))
		}
	}
	switch {
	case code > 128 && code < 128+65:
		st.Signal = code - 128
	case code >= 0 && killed == "":
		st.ExitCode = code
	default:
		st.Signal = int(syscall.SIGKILL)
	}
	hit := func(c backend.Cause) { st.LimitsHit = append(st.LimitsHit, c) }
	// Without a limit, the command raised the signal itself; with one,
	// the command's own CPU time is not known here (runsc exec's is not
	// the command's, the sandbox's is every command's) to tell it from a
	// command raising it (see Limits.CPUHit).
	lim := p.in.spec.Limits
	cpuHit := syscall.Signal(st.Signal) == syscall.SIGXCPU && lim.CPUTime > 0
	fileHit := lim.FileSizeHit(syscall.Signal(st.Signal))
	if cpuHit {
		hit(backend.CauseCPU)
	}
	if fileHit {
		hit(backend.CauseFile)
	}
	if killed != "" {
		if killed != backend.CauseKilled && killed != backend.CauseProtection { // a kill is no limit
			hit(killed)
		}
		st.ExitCode = -1
		if st.Signal == 0 {
			st.Signal = int(syscall.SIGKILL)
		}
	}
	switch {
	case killed != "":
		st.Cause = killed
	case cpuHit:
		st.Cause = backend.CauseCPU
	case fileHit:
		st.Cause = backend.CauseFile
	case st.Signal != 0:
		st.Cause = backend.CauseSignal
	default:
		st.Cause = backend.CauseExit
	}
	return st
}

// runscFailed is runsc's exit status when it failed (as a command's own
// exit status 128 would be).
const runscFailed = 128

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 64<<10 {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// EndReason says why the sandbox ended by itself, when a protection's
// going ended it; "" otherwise.
func (in *instance) EndReason() string {
	if path, ok := in.lost.Load().(string); ok {
		return "the host replaced or removed the protected path " + path + ", and its protection in the sandbox went with it"
	}
	return ""
}
