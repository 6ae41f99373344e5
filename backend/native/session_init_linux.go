package native

import (
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A session's init (initSpec.SessionFD) builds and restricts the sandbox
// exactly as a one-shot init does, then, instead of running one command,
// serves requests on a unix socket (SOCK_SEQPACKET: one request or one
// answer per packet) that only the host holds:
//
//	host                                   init (PID 1, restricted)
//	 |<-- fd 4: "ready" --------------------|  every restriction is in place
//	 |--- 'x' exec: id, argv, env, dir, ---->|  fork from the restricted thread,
//	 |    tty; fds 0-2 in SCM_RIGHTS         |  setsid, exec
//	 |<-- "started" id, pid | "error" id ----|
//	 |--- 's' signal: id, number ----------->|  kill(-pgid) while it is alive
//	 |--- 'k' kill: id, sessions ----------->|  kill all of it while it is alive
//	 |                                       |  (sessionkill_linux.go)
//	 |<-- "exit" id, status, usage, denials -|  the process ended (its
//	 |                                       |  background children go on)
//	 |--- 'q' quit ------------------------->|  kill all, save an overlay's
//	 |<-- "closed" --------------------------|  changes, exit
//	 end of file on the socket: init exits, and the kernel kills what is left.
//
// Every command is forked from the same locked thread the one-shot init
// forks from, the one that holds the sandbox's network namespace, no
// capabilities (bounding set included), no_new_privs, Landlock and the
// seccomp filters: each gets exactly the restrictions of the first.
const (
	reqExec   = 'x'
	reqSignal = 's'
	reqKill   = 'k'
	reqQuit   = 'q'
)

// maxRequest bounds one request: a packet of a SOCK_SEQPACKET socket must
// fit the socket's send buffer, which the host raises to this.
const maxRequest = 1 << 20

// sessionRequest is one request from the host.
type sessionRequest struct {
	Op     byte
	ID     uint64
	Args   []string
	Env    []string
	Dir    string
	Tty    bool
	Signal int
	// Sids are the sessions the host attributed to the command (reqKill).
	Sids []int
}

func encodeRequest(r *sessionRequest) []byte {
	e := encoder{b: []byte{r.Op}}
	e.uint(r.ID)
	e.strs(r.Args)
	e.strs(r.Env)
	e.str(r.Dir)
	e.bool(r.Tty)
	e.int(int64(r.Signal))
	e.ints(r.Sids)
	return e.b
}

func decodeRequest(b []byte) (*sessionRequest, error) {
	if len(b) == 0 {
		return nil, errShort
	}
	r := &sessionRequest{Op: b[0]}
	d := decoder{b: b[1:]}
	r.ID = d.uint()
	r.Args = d.strs()
	r.Env = d.strs()
	r.Dir = d.str()
	r.Tty = d.bool()
	r.Signal = int(d.int())
	r.Sids = d.ints()
	return r, d.done()
}

// sessionInit is the state of a session's init.
type sessionInit struct {
	fd   int
	seen *denials

	mu     sync.Mutex // held while forking, and for every answer: "started" goes before "exit"
	cond   *sync.Cond // signalled when a process was started
	forked uint64     // processes started so far
	byPid  map[int]*sessionProc
	byID   map[uint64]int
	// leaders maps a live command's leader's pid to its id, as byPid
	// does, for denialOwner, which must not wait for mu: mu is held
	// across a fork, whose child the supervisor may be answering.
	leaders sync.Map
	// oomAdj is init's /proc/self/oom_score_adj under a memory limit, -1
	// without. The OOM killer picks the process of the cgroup with the
	// most resident memory, and a command filling /tmp or /dev/shm holds
	// its pages in no process: the victim would be init, a Go program,
	// and the session would end with every command in it, reported as
	// killed. Each command is therefore forked with the highest score
	// (init raises its own for the fork, which the child inherits, and
	// lowers it back: a process may lower its score to what it started
	// with), so that the OOM killer takes a command before init.
	oomAdj  int
	oomBase []byte // init's own score, restored after each fork
}

// oomScore is init's /proc/self/oom_score_adj, opened, and its value
// then; fd -1: none.
type oomScore struct {
	fd   int
	base []byte
}

// openOOMAdj opens init's oom_score_adj and reads it, while init may
// still open its own /proc files and before any filter (see
// sessionInit.oomAdj). Best effort: without it a tmpfs filler may end
// the session rather than itself.
func openOOMAdj() oomScore {
	fd, err := unix.Open("/proc/self/oom_score_adj", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return oomScore{fd: -1}
	}
	b := make([]byte, 16)
	n, err := unix.Pread(fd, b, 0)
	if err != nil || n == 0 {
		unix.Close(fd)
		return oomScore{fd: -1}
	}
	return oomScore{fd: fd, base: b[:n]}
}

type sessionProc struct {
	id   uint64
	snap map[[2]int]int // the denials seen when it started
	// fullAtStart: the disk limit was already reached when it started
	// (an earlier command filled it): its failure is not blamed on it.
	fullAtStart bool
}

// serveSession is a session's init once restricted: it answers requests
// until the host closes the socket or asks it to quit, and returns, which
// makes init exit and the kernel kill what is left in the sandbox.
func serveSession(fd int, seen *denials, send func(message), oomAdj oomScore) error {
	// A command must not end the session by signalling PID 1. PID 1 gets
	// only the signals it handles, and the runtime handles all of them,
	// ending the process on many when they are sent (kill) rather than
	// raised by a fault: SIGTERM, SIGQUIT, SIGILL, SIGBUS, SIGFPE... Ignoring
	// them, as the one-shot init does after its fork, would pass them on
	// ignored to every later command; relayed here and dropped, they are
	// reset to the default in each forked child.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs)
	go func() {
		for range sigs {
		}
	}()
	s := &sessionInit{fd: fd, seen: seen, byPid: map[int]*sessionProc{}, byID: map[uint64]int{}, oomAdj: oomAdj.fd, oomBase: oomAdj.base}
	s.cond = sync.NewCond(&s.mu)
	seen.setOwner(s.denialOwner)
	go s.reap()
	spareThreads()
	send(message{Type: "ready"})

	buf := make([]byte, maxRequest)
	oob := make([]byte, unix.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return nil // the host is gone
		}
		fds := receivedFDs(oob[:oobn])
		req, err := decodeRequest(buf[:n])
		switch {
		case err != nil:
			// Both ends are this binary: a request that does not
			// decode is a bug, and the process it was for never starts.
			s.answer(message{Type: "error", Stage: "session request", Err: err.Error()})
		case req.Op == reqExec:
			s.exec(req, fds)
		case req.Op == reqSignal:
			s.signal(req.ID, syscall.Signal(req.Signal))
		case req.Op == reqKill:
			s.killCommand(req.ID, req.Sids)
		case req.Op == reqQuit:
			closeFDs(fds)
			s.quit(send)
			return nil
		}
		closeFDs(fds)
	}
}

// spareInitThreads is how many idle threads a session's init holds when
// it is ready, besides those it runs on.
const spareInitThreads = 4

// spareThreads bounds the threads init's runtime will want once the
// session is ready, and makes them now. The host counts what init holds
// when it is ready as init's (spareInitTasks), and a thread made after
// counts against the commands: while a fork bomb held every task of the
// limit, a new one failed and the runtime ended init, and the session
// with it ("failed to create new OS thread"). One P (init's work is
// fork, wait and answer; each more P is a thread the collector may
// want), and spareInitThreads threads made and left idle, which the
// scheduler takes before it makes one: a thread is wanted beyond them
// only when more of init's goroutines block in system calls at once
// than it has.
func spareThreads() {
	runtime.GOMAXPROCS(1)
	var held, release sync.WaitGroup
	held.Add(spareInitThreads)
	release.Add(1)
	for range spareInitThreads {
		go func() {
			// Each goroutine holds a thread of its own until all do;
			// unlocked, the threads go back to the scheduler, idle.
			runtime.LockOSThread()
			held.Done()
			release.Wait()
			runtime.UnlockOSThread()
		}()
	}
	held.Wait()
	release.Done()
}

func receivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if r, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// answer sends one message to the host; the caller may hold s.mu.
func (s *sessionInit) answer(m message) {
	// An error quotes what it was about (an argument, the directory):
	// whole, a large one made the packet too big for this socket's send
	// buffer, the answer was lost and the exec waited for ever (found by
	// a tester).
	m.Stage, m.Err, m.Gone = boundedText(m.Stage), boundedText(m.Err), boundedText(m.Gone)
	b := encodeMessage(&m)
	for {
		err := unix.Sendmsg(s.fd, b[4:], nil, nil, unix.MSG_NOSIGNAL)
		if err != unix.EINTR {
			return
		}
	}
}

// exec starts one command, from this (the restricted, locked) thread, in
// a session and process group of its own, with the fds the host sent as
// its stdin, stdout and stderr.
func (s *sessionInit) exec(req *sessionRequest, fds []int) {
	fail := func(stage string, err error) {
		m := message{Type: "error", ID: req.ID, Stage: stage, Err: err.Error()}
		if errno, ok := err.(syscall.Errno); ok {
			m.Errno = int(errno)
		}
		s.answer(m)
	}
	if len(fds) != 3 || len(req.Args) == 0 {
		s.mu.Lock()
		fail("exec", errShort)
		s.mu.Unlock()
		return
	}
	path, err := lookPath(req.Args[0], req.Env)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		fail("exec "+req.Args[0], err)
		return
	}
	snap := s.seen.snapshot()
	// Before the fork: the command may fill the disk before init runs
	// again after it (under load, it did, and went unblamed).
	fullAtStart := disk != nil && disk.full()
	if s.oomAdj >= 0 {
		unix.Pwrite(s.oomAdj, []byte("1000"), 0)
	}
	pid, err := syscall.ForkExec(path, req.Args, &syscall.ProcAttr{
		Dir:   req.Dir,
		Env:   req.Env,
		Files: []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])},
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: req.Tty, Ctty: 0},
	})
	if s.oomAdj >= 0 {
		unix.Pwrite(s.oomAdj, s.oomBase, 0)
	}
	if err != nil {
		// The child's chdir fails with the errno an exec would: say which.
		var st unix.Stat_t
		if req.Dir != "" {
			if serr := unix.Stat(req.Dir, &st); serr != nil {
				fail("chdir "+req.Dir, serr)
				return
			} else if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				fail("chdir "+req.Dir, unix.ENOTDIR)
				return
			}
		}
		fail("exec "+req.Args[0], err)
		return
	}
	s.byPid[pid] = &sessionProc{id: req.ID, snap: snap, fullAtStart: fullAtStart}
	s.byID[req.ID] = pid
	s.leaders.Store(pid, req.ID)
	s.forked++
	s.cond.Signal()
	s.answer(message{Type: "started", ID: req.ID, Pid: pid})
}

// signal sends sig to the process group of request id, while its leader
// lives: once it has been reaped its number may be reused.
func (s *sessionInit) signal(id uint64, sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pid, ok := s.byID[id]; ok {
		syscall.Kill(-pid, sig)
	}
}

// reap waits for every child of init (the commands, and what they left,
// re-parented to PID 1) and reports the commands' exits.
func (s *sessionInit) reap() {
	for {
		s.mu.Lock()
		forked := s.forked
		s.mu.Unlock()
		var ws unix.WaitStatus
		var ru unix.Rusage
		pid, err := unix.Wait4(-1, &ws, 0, &ru)
		if err == unix.EINTR {
			continue
		}
		s.mu.Lock()
		if err != nil {
			// No child: wait for the next command.
			for s.forked == forked {
				s.cond.Wait()
			}
			s.mu.Unlock()
			continue
		}
		if p, ok := s.byPid[pid]; ok {
			delete(s.byPid, pid)
			delete(s.byID, p.id)
			s.leaders.Delete(pid)
			// Whether the disk limit is reached as the command ends, for
			// its cause, as a run's init tells; not when it was already
			// when the command started, which then did not reach it.
			full := disk != nil && !p.fullAtStart && disk.full()
			s.answer(message{Type: "exit", ID: p.id, WaitStatus: uint32(ws),
				UserNanos: ru.Utime.Nano(), SysNanos: ru.Stime.Nano(), MaxRSSKiB: ru.Maxrss,
				Denials: s.seen.sinceFor(p.id, p.snap), DiskFull: full})
		}
		s.mu.Unlock()
	}
}

// quit kills every process of the sandbox, saves an overlay's changes
// under a disk limit, and reports "closed".
func (s *sessionInit) quit(send func(message)) {
	// kill(-1) from PID 1 reaches every other process of the namespace;
	// ESRCH once none is left (the reaper collects them meanwhile).
	for syscall.Kill(-1, syscall.SIGKILL) != syscall.ESRCH {
		time.Sleep(time.Millisecond)
	}
	closed := message{Type: "closed"}
	if disk != nil {
		closed.DiskFull = disk.full()
		done := make(chan error)
		go func() { done <- disk.merge() }()
		if err := <-done; err != nil {
			closed.MergeErr = err.Error()
		}
	}
	s.mu.Lock()
	s.answer(closed)
	s.mu.Unlock()
}

// denialOwner is the owner of the session's denials (see denials): the
// live command whose leader is process pid or an ancestor of it, or, for
// a process re-parented to init, leads the session it is in; 0 when none
// (a process that made a session of its own after its parent died). pid
// is in the sandbox's pid namespace, init's.
func (s *sessionInit) denialOwner(pid int) uint64 {
	sid := 0
	for range 1024 {
		if id, ok := s.leaders.Load(pid); ok {
			return id.(uint64)
		}
		info, ok := readProcInfo(pid)
		if !ok {
			return 0
		}
		if sid == 0 {
			sid = info.sid
		}
		if info.ppid <= 1 {
			break
		}
		pid = info.ppid
	}
	if id, ok := s.leaders.Load(sid); ok {
		return id.(uint64)
	}
	return 0
}
