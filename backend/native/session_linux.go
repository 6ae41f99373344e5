package native

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/cgroup"
	"github.com/moatbox/moat/internal/hostinfo"
	"github.com/moatbox/moat/internal/pipefd"
	"github.com/moatbox/moat/internal/pty"
	"github.com/moatbox/moat/internal/seccomp"
)

// ErrEnded is returned (wrapped) by Exec on an instance that has ended.
var ErrEnded = errors.New("sandbox has ended")

// Create implements backend.Lifecycle. It starts the sandbox through the
// init stage, never through the direct start: a caller that keeps
// sandboxes alive (a daemon, a library) holds other people's secrets, and
// the direct start's init shares the caller's memory. Init builds the
// root and restricts itself exactly as for a one-shot run, then takes
// exec requests (session_init_linux.go).
func (b *Backend) Create(ctx context.Context, spec *backend.Spec, stdio backend.Stdio) (backend.Instance, error) {
	if missing := hostinfo.Missing(); len(missing) > 0 {
		return nil, fmt.Errorf("this kernel (Linux %s) does not offer %s, which every sandbox needs: %s: %w",
			hostinfo.Kernel(), strings.Join(missing, " or "), hostinfo.NeedKernel, errors.ErrUnsupported)
	}
	// Wall and output are limits of each process (ProcessSpec), not of
	// the sandbox.
	sp := *spec
	sp.Limits.Wall, sp.Limits.OutputBytes = 0, 0
	r := &run{spec: &sp, stdio: backend.Stdio{ServeProxy: stdio.ServeProxy, ServeTUN: stdio.ServeTUN}, start: time.Now(), onInitParent: b.onInitParent}
	in := &instance{r: r, procs: map[uint64]*process{}, done: make(chan struct{}), landlock: spec.Landlock}
	if stdio.CheckExec != nil {
		// Each exec is attributed to its command (sessioncheck_linux.go).
		r.stdio.CheckExec, in.sessionCheck = in.checkExec, stdio.CheckExec
	}
	exe := b.Exe
	if exe == "" {
		exe = "/proc/self/exe"
	}
	// What startInit leaves to undo goes last.
	in.cleanup = append(in.cleanup, func() {
		for i := len(r.cleanup) - 1; i >= 0; i-- {
			r.cleanup[i]()
		}
	})
	created := false
	defer func() {
		if !created {
			in.runCleanup()
		}
	}()

	// A session always has a cgroup where this caller can make one: it
	// is what Stats reads, and sessions overlap (see OneAtATime).
	cg, err := runCgroup(&sp, false, initSpareTasks)
	if err != nil {
		return nil, err
	}
	if cg == nil && sp.CountCPU {
		// Without a cgroup, Stats counts from /proc what the processes
		// alive spent and what their parents waited for: a process the
		// kernel reaps by itself (its parent ignores SIGCHLD) takes its
		// CPU time with it. A cgroup counts it; where no bare one is made
		// (a v1 or hybrid host), one with no limit still counts (cpuacct).
		if cg, err = cgroup.New("moat-"+sp.RunID, cgroup.Limits{}); err != nil {
			return nil, fmt.Errorf("%w: a cgroup counts them, and none can be made here: %w", backend.ErrNoCPUCount, err)
		}
		if cg == nil {
			return nil, fmt.Errorf("%w: a cgroup counts them, and none can be made here", backend.ErrNoCPUCount)
		}
	}
	if cg != nil {
		r.cg = cg
		in.cleanup = append(in.cleanup, func() { cg.Destroy() })
		// Before init starts: from then on the caller's death leaves the
		// cgroup to whoever reads what the caller recorded.
		if stdio.OnCgroup != nil {
			if err := stdio.OnCgroup(cg.Dirs()); err != nil {
				return nil, fmt.Errorf("record the sandbox's cgroup: %w", err)
			}
		}
	}
	specR, specW, err := pipe(false)
	if err != nil {
		return nil, fmt.Errorf("spec pipe: %w", err)
	}
	in.cleanup = append(in.cleanup, func() { specR.Close(); specW.Close() })
	statR, statW, err := pipe(true)
	if err != nil {
		return nil, fmt.Errorf("status pipe: %w", err)
	}
	in.cleanup = append(in.cleanup, func() { statR.Close(); statW.Close() })
	// Init's own stdout and stderr (the latter only until it moves its
	// crash pipe there) lead nowhere: every command brings its own.
	outW, err := os.OpenFile(os.DevNull, os.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	errW, err := os.OpenFile(os.DevNull, os.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		outW.Close()
		return nil, err
	}
	in.cleanup = append(in.cleanup, func() { outW.Close(); errW.Close() })
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("session socket: %w", err)
	}
	// A request carries the command's argv and environment in one packet,
	// which must fit the socket's send buffer.
	if unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, maxRequest) != nil {
		unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, maxRequest)
	}
	host := os.NewFile(uintptr(fds[0]), "session")
	r.sessChild = os.NewFile(uintptr(fds[1]), "session-init")
	in.cleanup = append(in.cleanup, func() { host.Close(); r.sessChild.Close() })

	var filters [][]seccomp.Instruction
	for _, prof := range sp.Seccomp {
		prog, err := seccomp.Compile(prof, seccomp.NativeArch())
		if err != nil {
			return nil, fmt.Errorf("compile seccomp profile: %w", err)
		}
		filters = append(filters, prog)
	}
	if in.sessionCheck != nil {
		if filters, err = execFilters(&sp, filters, false); err != nil {
			return nil, err
		}
	} else if f, err := execFilters(&sp, filters, false); err == nil {
		// No exec is checked, but the host still hears of each setsid,
		// to end what a command detached at its limits
		// (sessionkill_linux.go); where it cannot, as before.
		filters, r.setsidOnly = f, true
	}
	if in.sessionCheck != nil || r.setsidOnly {
		in.leaders, in.sweepAt, in.pending, in.pendingNs, in.waiting = map[int]leader{}, minSweep, map[int]leader{}, map[int]int{}, map[int]int{}
		r.onSetsid, in.sessions, in.nsSids, in.sessSweepAt = in.noteSetsid, map[int]*process{}, map[int]int{}, minSweep
		r.seen.setOwner(in.denialOwner)
	}
	var trees map[string]*os.File
	idmapped := make(chan error, 1)
	idmapped <- nil
	if os.Geteuid() != 0 {
		if err := ownersUnchecked(&sp); err != nil {
			return nil, err
		}
	} else {
		t, maps, err := openTrees(&sp)
		if err != nil {
			return nil, err
		}
		trees = t
		in.cleanup = append(in.cleanup, func() {
			for _, f := range t {
				f.Close()
			}
		})
		if len(maps) > 0 {
			<-idmapped
			go func() { idmapped <- applyIDMaps(&sp, maps, r.onInitParent) }()
			in.cleanup = append(in.cleanup, func() { idmapped <- <-idmapped })
		}
	}
	if err := r.startInit(exe, filters, trees, idmapped, specR, specW, statW, outW, errW); err != nil {
		return nil, err
	}
	// From here on init runs: every way out kills and reaps it.
	in.cleanup = append(in.cleanup, func() {
		r.signal(syscall.SIGKILL)
		r.wait()
	})
	if r.netChan != nil {
		go r.receiveListener()
		in.cleanup = append(in.cleanup, r.closeListener)
	}
	msgs := make(chan message, 4)
	go readMessages(statR, msgs)
	select {
	case m, ok := <-msgs:
		switch {
		case ok && m.Type == "ready":
		case ok && m.Type == "error":
			return nil, initError(&m)
		default:
			r.signal(syscall.SIGKILL)
			r.wait()
			if text := <-r.crash; text != "" {
				return nil, &backend.InitError{Stage: "init", Err: fmt.Errorf("moat's init died: %s", text)}
			}
			return nil, &backend.InitError{Stage: "init", Err: errors.New("moat's init ended before the sandbox was ready")}
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := r.spareInitTasks(sp.Limits); err != nil {
		return nil, err
	}
	// Every mount is in place once init is ready: a protection that goes
	// ends the sandbox (mountwatch_linux.go).
	stopWatch, err := watchMounts(r.pid, r.spec, func(path string) {
		in.lost.CompareAndSwap(nil, path)
		in.end()
	})
	if err != nil {
		return nil, &backend.InitError{Stage: "watch the protections", Err: err}
	}
	if stopWatch != nil {
		in.cleanup = append(in.cleanup, stopWatch)
	}
	c, err := net.FileConn(host)
	if err != nil {
		return nil, fmt.Errorf("session socket: %w", err)
	}
	in.conn = c.(*net.UnixConn)
	in.cleanup = append(in.cleanup, func() { in.conn.Close() })
	created = true
	go in.readAnswers()
	return in, nil
}

// spareInitTasks keeps init's own tasks (the threads of a Go program) out
// of the sandbox's pids limit, which is the commands': once init is
// ready, the limit becomes the policy's plus the tasks init holds then.
// A cgroup's is raised (best effort: the limit stays the stricter one); an
// RLIMIT_NPROC, which init set initSpareTasks above the policy's, is
// lowered, and a failure to fails the session, whose limit would be loose.
// A thread init makes later still counts against its commands.
func (r *run) spareInitTasks(lim backend.Limits) error {
	if lim.Pids <= 0 {
		return nil
	}
	if !lim.PidsRlimit {
		if r.cg == nil {
			return nil
		}
		// The cgroup was made with initSpareTasks more (runCgroup): a
		// limit not lowered here would hold that many more processes than
		// asked, so failing to lower it fails the session.
		st, err := r.cg.Stats()
		if err == nil {
			err = r.cg.SetPids(lim.Pids + max(st.PidsCurrent, 1))
		}
		if err != nil {
			return fmt.Errorf("set the sandbox's processes limit: %w", err)
		}
		return nil
	}
	n, err := initThreads(r.pid)
	if err == nil {
		var cur unix.Rlimit
		if err = unix.Prlimit(r.pid, unix.RLIMIT_NPROC, nil, &cur); err == nil {
			v := min(uint64(lim.Pids)+uint64(n), cur.Max)
			err = unix.Prlimit(r.pid, unix.RLIMIT_NPROC, &unix.Rlimit{Cur: v, Max: v}, nil)
		}
	}
	if err != nil {
		return fmt.Errorf("set the sandbox's processes limit: %w", err)
	}
	return nil
}

// initThreads reads the number of threads of process pid.
func initThreads(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("no thread count in " + "/proc/" + strconv.Itoa(pid) + "/status")
}

// instance is a live session sandbox (backend.Instance).
type instance struct {
	r        *run
	conn     *net.UnixConn // the request socket
	landlock bool
	cleanup  []func() // undone in reverse by runCleanup

	wmu    sync.Mutex // held to send a request
	mu     sync.Mutex // procs, next, closed, quit
	procs  map[uint64]*process
	next   uint64
	closed *message // init's "closed" answer to a quit request
	quit   chan struct{}
	// sessionCheck is Create's Stdio.CheckExec, asked about the execs
	// no command can be told for; leaders are the commands' first
	// processes by host pid, sessions the command each session of the
	// sandbox was made for, by session id (see attribute); nil maps where
	// the host hears of no setsid. Under mu.
	sessionCheck func(backend.ExecCall) error
	leaders      map[int]leader
	sessions     map[int]*process // nil: made by no command that can be told
	nsSids       map[int]int      // a session of sessions: its id in the sandbox
	sweepAt      int              // the size of leaders that starts a sweep
	sessSweepAt  int              // the size of sessions that starts one
	// Without the exec check, a command's leader is named by init's
	// "started" (see nameLeader): pending are the children of init that
	// called setsid, by host pid (leader.p nil), pendingNs the same by
	// their pid in the sandbox, and waiting the sessions made meanwhile
	// under one of them, by session id: its host pid.
	pending   map[int]leader
	pendingNs map[int]int
	waiting   map[int]int

	endOnce sync.Once
	done    chan struct{}
	// lost is the path of the protection whose going ended the sandbox
	// (backend.CauseProtection).
	lost atomic.Value
	// endStats are the cgroup's counters as the instance ended, before
	// the cgroup went: the status of a command the end cut short still
	// tells whether the memory limit did it (init may be the OOM
	// killer's victim, see sessionInit.oomAdj).
	endStats atomic.Pointer[cgroup.Stats]
}

func (in *instance) runCleanup() {
	for i := len(in.cleanup) - 1; i >= 0; i-- {
		in.cleanup[i]()
	}
	in.cleanup = nil
}

// send writes one request, with fds, as one packet.
func (in *instance) send(req *sessionRequest, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	b := encodeRequest(req)
	if len(b) > maxRequest {
		return fmt.Errorf("command line and environment of %d bytes are above the limit of %d", len(b), maxRequest)
	}
	in.wmu.Lock()
	defer in.wmu.Unlock()
	_, _, err := in.conn.WriteMsgUnix(b, oob, nil)
	if errors.Is(err, unix.EMSGSIZE) {
		return fmt.Errorf("command line and environment of %d bytes do not fit the session's request socket (its send buffer, at most net.core.wmem_max without CAP_NET_ADMIN): %w", len(b), err)
	}
	return err
}

// readAnswers dispatches init's answers until init is gone, then ends
// the instance. It waits for each answer holding no buffer, learns its
// size, and reads it into one of that size: a session is idle most of its
// life, and a buffer kept for the next answer (on this goroutine's stack,
// where the compiler puts a fixed-size one) would be held all along.
func (in *instance) readAnswers() {
	rc, err := in.conn.SyscallConn()
	for err == nil {
		var n int
		var perr error
		err = rc.Read(func(fd uintptr) bool {
			// A peek with MSG_TRUNC gives the packet's whole length.
			for {
				n, _, perr = unix.Recvfrom(int(fd), nil, unix.MSG_PEEK|unix.MSG_TRUNC|unix.MSG_DONTWAIT)
				if perr != unix.EINTR {
					return perr != unix.EAGAIN
				}
			}
		})
		if err != nil || perr != nil || n == 0 {
			break
		}
		buf := make([]byte, n)
		if n, _, _, _, err = in.conn.ReadMsgUnix(buf, nil); err != nil || n == 0 {
			break
		}
		m, derr := decodeMessage(buf[:n])
		if derr != nil {
			continue
		}
		in.mu.Lock()
		p := in.procs[m.ID]
		switch m.Type {
		case "started", "error":
			if p != nil {
				p.startCh <- m
				// After Exec has its answer (in.mu still held: a request
				// to end p waits for its name).
				if m.Type == "started" && in.pending != nil && in.sessionCheck == nil {
					in.nameLeader(p, m.Pid)
				}
			}
		case "exit":
			if p != nil {
				delete(in.procs, m.ID)
				p.finish(&m)
			}
		case "closed":
			in.closed = &m
			if in.quit != nil {
				close(in.quit)
				in.quit = nil
			}
		}
		in.mu.Unlock()
	}
	in.end()
}

// end tears the instance down, once: init is killed and reaped (the
// kernel kills the rest of its PID namespace with it), the cgroup is
// emptied and removed, and the processes still waited for end.
func (in *instance) end() {
	in.endOnce.Do(func() {
		if cg := in.r.cg; cg != nil {
			if s, err := cg.Stats(); err == nil {
				in.endStats.Store(&s)
			}
			cg.Kill()
		}
		in.runCleanup()
		in.mu.Lock()
		for id, p := range in.procs {
			delete(in.procs, id)
			p.finish(nil)
		}
		if in.quit != nil {
			close(in.quit)
			in.quit = nil
		}
		in.mu.Unlock()
		close(in.done)
	})
}

// Done implements backend.Instance.
func (in *instance) Done() <-chan struct{} { return in.done }

// Destroy implements backend.Instance. A sandbox with changes to save (an
// overlay workspace under a disk limit) is asked to save them first, for
// as long as ctx allows (at most saveGrace).
func (in *instance) Destroy(ctx context.Context) error {
	if in.r.save {
		in.mu.Lock()
		quit := make(chan struct{})
		in.quit = quit
		in.mu.Unlock()
		err := in.send(&sessionRequest{Op: reqQuit}, nil)
		if err == nil {
			t := time.NewTimer(saveGrace)
			select {
			case <-quit:
			case <-ctx.Done():
			case <-t.C:
			case <-in.done:
			}
			t.Stop()
		}
	}
	in.end()
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed != nil && in.closed.MergeErr != "" {
		return &backend.InitError{Stage: "save overlay changes", Err: errors.New(in.closed.MergeErr)}
	}
	return nil
}

// Stats implements backend.Instance: from the sandbox's cgroup, and what
// it does not count (no cgroup, or one without those controllers) from
// /proc, over init and its descendants.
func (in *instance) Stats() backend.Stats {
	var st backend.Stats
	if in.r.cg != nil {
		if s, err := in.r.cg.Stats(); err == nil {
			st = backend.Stats{CPU: time.Duration(s.CPUUsageNanos), MemoryBytes: s.MemoryCurrent, MemoryPeak: s.MemoryPeak,
				Pids: s.PidsCurrent, PidsLimitHits: s.PidsLimitHits, OOMKills: s.OOMKills}
		}
	}
	if st.CPU == 0 || st.MemoryBytes == 0 || st.Pids == 0 {
		select {
		case <-in.done:
			return st
		default:
		}
		cpu, mem, tasks := procStats(in.r.pid)
		if st.CPU == 0 {
			st.CPU = cpu
		}
		if st.MemoryBytes == 0 {
			st.MemoryBytes = mem
		}
		if st.Pids == 0 {
			st.Pids = tasks
		}
	}
	return st
}

// procStats sums, over the process pid and its descendants, the CPU time
// (with that of the children they reaped), the resident memory and the
// tasks, as /proc gives them.
func procStats(pid int) (cpu time.Duration, mem, tasks int64) {
	const tick = time.Second / 100 // USER_HZ, as /proc counts
	page := int64(os.Getpagesize())
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
		if len(f) < 22 {
			continue
		}
		n := func(k int) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
		// Fields from state (index 0): utime 11, stime 12, cutime 13,
		// cstime 14, num_threads 17, rss 21.
		cpu += time.Duration(n(11)+n(12)+n(13)+n(14)) * tick
		tasks += n(17)
		mem += n(21) * page
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
	return cpu, mem, tasks
}

// counted reports whether the sandbox's cgroup counts limits hit (memory,
// pids), which each process's status compares before and after it.
func (in *instance) counted() bool {
	l := in.r.spec.Limits
	return in.r.cg != nil && (l.MemoryBytes > 0 || l.Pids > 0 && !l.PidsRlimit)
}

// process is one command of a session (backend.Process).
type process struct {
	in      *instance
	id      uint64
	spec    *backend.ProcessSpec
	start   time.Time
	started time.Time
	startCh chan message // "started" or "error"
	exited  chan struct{}
	exit    *message // nil when the sandbox ended first
	killed  atomic.Value
	output  atomic.Int64
	cgStart cgroup.Stats

	// check is the Exec's Stdio.CheckExec, leader the host pid of its
	// first process once seen (in.mu), seen the seccomp refusals the
	// host counted before it started (a session that checks execs).
	check  func(backend.ExecCall) error
	leader int
	seen   map[[2]int]int

	copies  sync.WaitGroup
	readers []*os.File // the host's ends of the outputs (or the pty)
	tty     *os.File   // the pty's master

	waitOnce sync.Once
	status   *backend.ExitStatus
}

// finish records how the process ended; in.mu is held.
func (p *process) finish(m *message) {
	p.exit = m
	close(p.exited)
}

// Exec implements backend.Instance.
func (in *instance) Exec(ctx context.Context, ps *backend.ProcessSpec, stdio backend.Stdio) (backend.Process, error) {
	if len(ps.Args) == 0 {
		return nil, errors.New("no command given")
	}
	select {
	case <-in.done:
		return nil, ErrEnded
	default:
	}
	p := &process{in: in, spec: ps, start: time.Now(), startCh: make(chan message, 1), exited: make(chan struct{}), check: stdio.CheckExec}
	if in.sessions != nil {
		// The host's supervisor, not init, answers the observed filter.
		p.seen = in.r.seen.snapshot()
	}
	if in.counted() {
		p.cgStart, _ = in.r.cg.Stats()
	}
	var child []*os.File // the process's ends, closed once sent
	defer func() {
		for _, f := range child {
			f.Close()
		}
	}()
	var fds [3]int
	var stdin io.Reader
	if ps.Tty {
		master, slave, err := pty.Open(ps.Rows, ps.Cols)
		if err != nil {
			return nil, err
		}
		child = append(child, slave)
		p.tty = master
		p.readers = append(p.readers, master)
		fds = [3]int{int(slave.Fd()), int(slave.Fd()), int(slave.Fd())}
		stdin = stdio.Stdin
	} else {
		// An anonymous pipe is passed as it is, but no other file (see
		// internal/pipefd), and never a terminal (see backend.Stdio): the
		// command could push keystrokes into it (TIOCSTI) or change its
		// mode; those are read through a pipe. A session's stdin is its
		// caller's own pipe (the daemon's), which nothing on the host
		// reads from: a command that reopens it to write feeds itself, so
		// it is passed whoever made it (a run's is its caller's, which a
		// shell may read on: moat run relays it, Backend.Run).
		f, isFile := stdio.Stdin.(*os.File)
		switch {
		case isFile && f != nil && (pipefd.Anonymous(f) || pipefd.Passable(f, in.r.spec.User.HostUID)):
			fds[0] = int(f.Fd())
		case stdio.Stdin == nil || isFile && f == nil:
			null, err := os.Open(os.DevNull)
			if err != nil {
				return nil, err
			}
			child = append(child, null)
			fds[0] = int(null.Fd())
		default:
			r, w, err := pipe(false)
			if err != nil {
				return nil, fmt.Errorf("stdin pipe: %w", err)
			}
			child = append(child, r)
			fds[0] = int(r.Fd())
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
		for i := 1; i <= outputs; i++ {
			r, w, err := pipe(true)
			if err != nil {
				p.closeReaders()
				return nil, fmt.Errorf("output pipe: %w", err)
			}
			child = append(child, w)
			p.readers = append(p.readers, r)
			fds[i] = int(w.Fd())
		}
		if outputs == 1 {
			fds[2] = fds[1]
		}
	}

	in.mu.Lock()
	in.next++
	p.id = in.next
	in.procs[p.id] = p
	in.mu.Unlock()
	err := in.send(&sessionRequest{Op: reqExec, ID: p.id, Args: ps.Args, Env: ps.Env, Dir: ps.Dir, Tty: ps.Tty}, fds[:])
	if err != nil {
		in.mu.Lock()
		delete(in.procs, p.id)
		in.mu.Unlock()
	}
	for _, f := range child {
		f.Close()
	}
	child = nil
	if err != nil {
		p.closeReaders()
		select {
		case <-in.done:
			return nil, ErrEnded
		default:
		}
		return nil, fmt.Errorf("send exec request: %w", err)
	}
	var m message
	select {
	case m = <-p.startCh:
	case <-p.exited:
		// A fast process's exit may be dispatched before Exec reads
		// its start; without a start, the sandbox ended.
		select {
		case m = <-p.startCh:
		default:
			p.closeReaders()
			return nil, ErrEnded
		}
	}
	if m.Type != "started" {
		in.mu.Lock()
		delete(in.procs, p.id)
		in.mu.Unlock()
		p.closeReaders()
		return nil, initError(&m)
	}
	p.started = time.Now()
	if ps.Tty {
		p.copies.Add(1)
		go p.copyOut(p.tty, stdio.Stdout)
		if stdin != nil {
			go func() {
				io.Copy(p.tty, stdin)
			}()
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

// kill ends the process for cause; the first cause wins. At its wall
// clock or output limit, or cancelled (its caller went), init ends every
// process of the command, those in sessions it made included
// (sessionkill_linux.go).
func (p *process) kill(cause backend.Cause) {
	if !p.killed.CompareAndSwap(nil, cause) {
		return
	}
	if cause == backend.CauseTimeout || cause == backend.CauseOutput || cause == backend.CauseKilled {
		p.in.send(&sessionRequest{Op: reqKill, ID: p.id, Sids: p.in.sessionsOf(p)}, nil)
		return
	}
	p.sendSignal(syscall.SIGKILL)
}

func (p *process) sendSignal(s syscall.Signal) error {
	return p.in.send(&sessionRequest{Op: reqSignal, ID: p.id, Signal: int(s)}, nil)
}

// copyOut copies one output, counting the process's outputs together
// against its limit; past it, the process's group is killed.
func (p *process) copyOut(src io.Reader, dst io.Writer) {
	defer p.copies.Done()
	if dst == nil {
		dst = io.Discard
	}
	limit := p.spec.Output
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			total := p.output.Add(int64(n))
			if limit > 0 && total > limit {
				if keep := int64(n) - (total - limit); keep > 0 {
					dst.Write(buf[:keep])
				}
				p.kill(backend.CauseOutput)
				io.Copy(io.Discard, src)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				if c, ok := src.(io.Closer); ok {
					c.Close()
				}
				return
			}
		}
		if err != nil {
			return
		}
	}
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
		// A pty's last output can wait in the terminal layer's buffer,
		// which TIOCINQ does not count, until a kernel worker moves it
		// to the master: a terminal gets longer to show it.
		idle, need := 0, 2
		if p.tty != nil {
			need = 10
		}
		for idle < need {
			select {
			case <-copied:
				idle = need
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
	if !ok || s <= 0 || s >= 256 {
		return fmt.Errorf("signal %v cannot be sent to a sandboxed process", sig)
	}
	select {
	case <-p.exited:
		return os.ErrProcessDone
	default:
	}
	return p.sendSignal(s)
}

// Resize implements backend.Process.
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

// exitStatus turns what was seen into an ExitStatus, with the causes Run
// gives; the sandbox's cgroup counters are compared with their values
// when the process started.
func (p *process) exitStatus() *backend.ExitStatus {
	st := &backend.ExitStatus{ExitCode: -1, Wall: time.Since(p.start), OutputBytes: backend.Delivered(p.output.Load(), p.spec.Output), Setup: p.started.Sub(p.start)}
	if p.in.landlock {
		st.LandlockABI = UsableLandlockABI()
	}
	exit := p.exit
	if exit != nil {
		ws := syscall.WaitStatus(exit.WaitStatus)
		if ws.Signaled() {
			st.Signal = int(ws.Signal())
		} else {
			st.ExitCode = ws.ExitStatus()
		}
		st.CPU = time.Duration(exit.UserNanos + exit.SysNanos)
		st.MaxMemory = exit.MaxRSSKiB * 1024
		denials := exit.Denials
		if p.seen != nil {
			denials = p.in.r.seen.sinceFor(p.id, p.seen)
		}
		st.Denials = p.in.r.explain(denials)
	} else {
		st.Signal = int(syscall.SIGKILL) // the sandbox ended under it
	}
	var oom, pids int64
	if p.in.counted() {
		s, err := p.in.r.cg.Stats()
		if end := p.in.endStats.Load(); end != nil {
			s, err = *end, nil
		}
		if err == nil {
			oom, pids = s.OOMKills-p.cgStart.OOMKills, s.PidsLimitHits-p.cgStart.PidsLimitHits
		}
	}
	hit := func(c backend.Cause) { st.LimitsHit = append(st.LimitsHit, c) }
	if oom > 0 {
		hit(backend.CauseMemory)
	}
	if pids > 0 {
		hit(backend.CausePids)
	}
	// The hard CPU limit's kill, when SIGXCPU was ignored, as Run reads it.
	lim := p.in.r.spec.Limits
	cpuHit := lim.CPUHit(syscall.Signal(st.Signal), st.CPU) && (st.Signal == int(syscall.SIGXCPU) || exit != nil)
	if cpuHit {
		hit(backend.CauseCPU)
	}
	fileHit := lim.FileSizeHit(syscall.Signal(st.Signal))
	if fileHit {
		hit(backend.CauseFile)
	}
	diskFull := exit != nil && exit.DiskFull
	if diskFull {
		hit(backend.CauseDisk)
	}
	killed, _ := p.killed.Load().(backend.Cause)
	if killed == "" && exit == nil {
		killed = backend.CauseKilled
		if path, ok := p.in.lost.Load().(string); ok {
			killed = backend.CauseProtection
			st.Denials = append(st.Denials, backend.ProtectionLost(path))
		}
	}
	if killed != "" && killed != backend.CauseKilled && killed != backend.CauseProtection { // a kill is no limit
		hit(killed)
	}
	switch {
	case killed != "" && !(killed == backend.CauseKilled && oom > 0):
		st.Cause = killed
	case oom > 0 && st.Signal == int(syscall.SIGKILL):
		st.Cause = backend.CauseMemory
	case cpuHit:
		st.Cause = backend.CauseCPU
	case fileHit:
		st.Cause = backend.CauseFile
	case diskFull && (st.Signal != 0 || st.ExitCode != 0):
		st.Cause = backend.CauseDisk
	case pids > 0 && (st.Signal != 0 || st.ExitCode != 0):
		st.Cause = backend.CausePids
	case oom > 0 && st.ExitCode != 0:
		st.Cause = backend.CauseMemory
	case st.Signal != 0:
		st.Cause = backend.CauseSignal
	default:
		st.Cause = backend.CauseExit
	}
	return st
}

// EndReason says why the sandbox ended by itself, when a protection's
// going ended it; "" otherwise.
func (in *instance) EndReason() string {
	if path, ok := in.lost.Load().(string); ok {
		return "the host replaced or removed the protected path " + path + ", and its protection in the sandbox went with it"
	}
	return ""
}
