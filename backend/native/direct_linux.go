package native

import (
	"syscall"
	"unsafe"
)

// The direct start: the host clones a child that builds the sandbox and
// becomes its PID 1 without ever running Go code again (on amd64 the child
// shares the host's address space, on stacks of its own; see forkDirect). Re-executing the
// moat binary as init (the init stage, init_linux.go) costs every run a
// second exec of a 10 MB binary, a second Go runtime start with its
// package initialisation, and a second multi-threaded exit: about 2 ms
// here, more than bubblewrap's whole start. Go offers no way to run code
// between fork and exec, so this file does what the syscall package does
// for ForkExec, and what gVisor does for its own forks: it calls the
// runtime's fork hooks and, in the child, only raw system calls.
//
// Everything the child does is decided on the host beforehand, as a plan
// (directplan_linux.go): a list of steps, each one system call with its
// arguments already in memory (C strings, structs), plus a few pseudo
// steps that move a result (an fd) into a struct or test a file's type.
// The child runs the list, then starts the command's process (a vfork,
// or a fork), which runs a second list ending in execve, and stays as the
// command's reaper and signal forwarder in a loop of raw calls. A step that fails sends the host the
// step's stage and errno, as the init stage does, and the child exits.
//
// What the child may do is what runs safely in a clone of a Go process
// that the Go runtime knows nothing of: no allocation, no stack growth (runtime_BeforeFork poisons the
// stack guard so that any attempt crashes), no write of a pointer (the
// write barrier could call the runtime), no call of a function that is not
// marked nosplit. The functions below keep to that; the linker checks that
// their nosplit chains fit the stack. The child writes only integers, to
// memory the plan set aside (vals, the record, the structs of pseudo
// steps).

//go:linkname runtimeBeforeFork syscall.runtime_BeforeFork
func runtimeBeforeFork()

//go:linkname runtimeAfterFork syscall.runtime_AfterFork
func runtimeAfterFork()

//go:linkname runtimeAfterForkInChild syscall.runtime_AfterForkInChild
func runtimeAfterForkInChild()

// Step kinds.
const (
	kindCall      = iota // a system call
	kindPoke32           // *(*int32)(p) = int32(vals[a[1]])
	kindLoad32           // vals[save] = *(*uint32)(p)
	kindLoad16           // vals[save] = *(*uint16)(p)
	kindFailMode         // fail with errno a[2] when vals[a[0]]&S_IFMT == a[1]
	kindExpect           // fail with errno a[2] unless vals[a[0]] == a[1]
	kindSpawnNet         // vals[save] = pid of a helper running net (shareVM only)
	kindExitErrno        // fail unless the wait status vals[a[0]] is exit 0; errno: the exit code, or a[2]
	kindRetry            // when the last call failed with errno a[1] (its ok): again from step a[0], at most a[2] times (count in vals[a[3]]), then fail
)

// Conditions on a step, tested against vals[condVal], a file mode.
const (
	condNone = iota
	condDir
	condNotDir
)

// step is one step of a plan.
type step struct {
	nr   uintptr        // system call number (kindCall)
	a    [6]uintptr     // arguments
	p    unsafe.Pointer // the memory a pseudo step writes or reads
	kind uint8
	ref  uint8 // bit i set: a[i] is an index into vals, whose value is passed
	cond uint8
	// save is the index into vals that receives the result; 0: none.
	save    uint16
	condVal uint16
	// ok is an errno that counts as success; skip is an errno that
	// skips the rest of the step's group (an optional path that is
	// missing). group 0 is no group.
	ok, skip uint16
	group    uint16
	stage    uint16 // what failed, for the host: an index into plan.stages
}

// Record tags on the status pipe (record[0]).
const (
	recError   = 1 // [1] stage, [2] errno
	recStarted = 2 // [3] the command's pid
	recExit    = 3 // [4] wait status, [8:] struct rusage of the reaped; [26] free bytes on the disk limit's tmpfs, [27] 1 if measured, [28] its free inodes, [29] its inodes
)

// record is one message of the direct start to the host: written whole
// with one write(2), which is atomic on a pipe at this size.
type record [32]uint64

// forkState is what the child of a direct start reads and writes. The
// host fills it before the fork; the child's writes land in its own copy.
type forkState struct {
	setup  []step // run by init, before the command is forked
	resets []step // run by init first when needResets: signal handlers to SIG_DFL
	exec   []step // run by the command's process; ends in execve
	post   []step // run by init once the command has started
	net    []step // run by the network namespace helper (shareVM only)
	vals   []uintptr

	mapFD    int // read end: one byte once the uid and gid maps are written
	mapW     int // its write end, which the child closes first
	ctlFD    int // the control pipe: signals to forward
	statusFD int // records to the host
	sigFD    int // index into vals of init's signalfd (SIGCHLD)
	scratch  int // index into vals of the disk limit tmpfs's fd; 0: no limit

	// With shareVM: the stacks (init's: stackSize bytes from stack; the
	// command's process's: ending at cmdStack), and childEntry's
	// arguments.
	stack, stackSize, cmdStack uintptr
	initArg, cmdArg            childArg
	netStack                   uintptr
	netArg                     childArg

	goByte     [8]byte
	needResets bool // the child was started without CLONE_CLEAR_SIGHAND
	// share: the child shares the host's address space (shareVM, unless
	// Backend.ForkStart); cmdFlags are the clone flags of the command's
	// process (a vfork on its own stack when sharing, a fork otherwise).
	share    bool
	cmdFlags uintptr

	rec     record
	ctlBuf  [2]byte
	sigBuf  [128]byte
	pollFDs [2]pollFD
	ws      int32 // wait4's answer
	wstatus int32 // the command's
	cmdPid  uintptr
	rusage  [18]uint64 // struct rusage
	statfs  syscall.Statfs_t
}

type pollFD struct {
	fd      int32
	events  int16
	revents int16
}

// forkDirect starts the direct start's child with the given arguments
// (with clone3 when asked, needed to start in a cgroup, else clone); in
// the parent it returns the child's pid. The child never returns.
//
// With shareVM the child shares the host's address space and runs on
// f.stack: the host keeps f and the stack alive, and unmapped only after
// the child has been reaped. It inherits the calling thread's signal mask,
// which runtimeBeforeFork sets to block everything, and starts with every
// handler at its default (CLONE_CLEAR_SIGHAND; where clone3 is refused, a
// copy of the Go runtime's handlers, which its first steps, f.resets, set
// back to the default). It keeps every signal blocked, so no handler of
// the runtime ever runs in it. runtimeAfterForkInChild, which does that
// for a forked child, writes a global of the runtime, which this child
// shares.
//
//go:noinline
//go:norace
//go:nocheckptr
func forkDirect(f *forkState, args *cloneArgs, clone3 bool) (pid uintptr, errno syscall.Errno) {
	if f.share {
		args.flags |= syscall.CLONE_VM
		runtimeBeforeFork()
		var e uintptr
		if clone3 {
			args.flags |= cloneClearSighand
			args.stack, args.stackSize = uint64(f.stack), uint64(f.stackSize)
			pid, e = rawClone(sysClone3, uintptr(unsafe.Pointer(args)), unsafe.Sizeof(*args), uintptr(unsafe.Pointer(&f.initArg)))
		} else {
			f.needResets = true
			pid, e = rawClone(syscall.SYS_CLONE, uintptr(args.flags|args.exitSignal), f.stack+f.stackSize, uintptr(unsafe.Pointer(&f.initArg)))
		}
		runtimeAfterFork()
		return pid, syscall.Errno(e)
	}
	runtimeBeforeFork()
	if clone3 {
		pid, _, errno = syscall.RawSyscall(sysClone3, uintptr(unsafe.Pointer(args)), unsafe.Sizeof(*args), 0)
	} else {
		// fork semantics: no new stack, the exit signal in the flags.
		pid, _, errno = syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(args.flags|args.exitSignal), 0, 0, 0, 0, 0)
	}
	if errno != 0 || pid != 0 {
		runtimeAfterFork()
		return pid, errno
	}
	// The child: signals back at their defaults and unblocked.
	runtimeAfterForkInChild()
	childMain(f)
	return 0, 0 // not reached
}

// commandFlags are the clone flags of the command's process: a vfork on a
// stack of its own when init shares moat's memory, else a fork that holds
// init until the command has called execve (CLONE_VFORK without
// CLONE_VM). Either way init forwards signals only once the command leads
// its process group: a signal moat sent while a plain fork's child had
// not yet called setsid went to a group that did not exist, and was lost
// (TestEarlySignalLeavesNoCgroup, under a memory limit, which forks).
func commandFlags(share bool) uintptr {
	if share {
		return syscall.CLONE_VM | syscall.CLONE_VFORK | uintptr(syscall.SIGCHLD)
	}
	return syscall.CLONE_VFORK | uintptr(syscall.SIGCHLD)
}

// childArg is the argument rawClone passes to childEntry.
type childArg struct {
	f       *forkState
	command bool
	hold    bool // only wait to be killed (see holdUsernsVM)
	ppid    int  // with hold: moat's pid
	net     bool // the network namespace helper (see netMain)
}

// childEntry is where a child started by rawClone begins, on its own
// stack: init (childMain), or the command's process (commandMain). Only
// assembly calls it.
//
//lint:ignore U1000 called from direct_linux_amd64.s
//go:nosplit
//go:norace
func childEntry(a *childArg) {
	if a.hold {
		// It dies with moat: if moat died before the signal was set, the
		// holder already has another parent.
		syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0)
		if ppid, _, _ := syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0); int(ppid) != a.ppid {
			rawExit(1)
		}
		for {
			syscall.RawSyscall6(syscall.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
		}
	}
	if a.command {
		commandMain(a.f)
	}
	if a.net {
		netMain(a.f)
	}
	childMain(a.f)
}

// netMain runs the network namespace helper's steps and exits with 0,
// or with the failing step's errno: it shares init's memory, so it must
// not write the record init may be writing.
//
//go:nosplit
//go:norace
func netMain(f *forkState) {
	if i, e := f.run(f.net); i >= 0 {
		rawExit(e & 0xff)
	}
	rawExit(0)
}

// cloneArgs is struct clone_args.
type cloneArgs struct {
	flags      uint64
	pidFD      uint64
	childTID   uint64
	parentTID  uint64
	exitSignal uint64
	stack      uint64
	stackSize  uint64
	tls        uint64
	setTID     uint64
	setTIDSize uint64
	cgroup     uint64
}

const sysClone3 = 435

// cloneClearSighand is CLONE_CLEAR_SIGHAND (Linux 5.5, clone3 only): the
// child starts with every signal handler at its default.
const cloneClearSighand = 0x100000000

//go:nosplit
//go:norace
func rawExit(code uintptr) {
	for {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, code, 0, 0)
	}
}

// send writes f.rec to the host.
//
//go:nosplit
//go:norace
func (f *forkState) send() {
	syscall.RawSyscall(syscall.SYS_WRITE, uintptr(f.statusFD), uintptr(unsafe.Pointer(&f.rec[0])), unsafe.Sizeof(f.rec))
}

// fail reports a failed step and ends the process.
//
//go:nosplit
//go:norace
func (f *forkState) fail(stage uint16, errno uintptr, code uintptr) {
	f.rec[0], f.rec[1], f.rec[2] = recError, uint64(stage), uint64(errno)
	f.send()
	rawExit(code)
}

// run runs steps. It returns the index of the step that failed, or -1.
//
//go:nosplit
//go:norace
//go:nocheckptr
func (f *forkState) run(steps []step) (int, uintptr) {
	var skipping uint16
	var lastErr uintptr // the last call's errno, 0 if it succeeded
	for i := 0; i < len(steps); i++ {
		s := &steps[i]
		if s.group != 0 && s.group == skipping {
			continue
		}
		switch s.cond {
		case condDir:
			if f.vals[s.condVal]&syscall.S_IFMT != syscall.S_IFDIR {
				continue
			}
		case condNotDir:
			if f.vals[s.condVal]&syscall.S_IFMT == syscall.S_IFDIR {
				continue
			}
		}
		switch s.kind {
		case kindPoke32:
			*(*int32)(s.p) = int32(f.vals[s.a[1]])
			continue
		case kindLoad32:
			f.vals[s.save] = uintptr(*(*uint32)(s.p))
			continue
		case kindLoad16:
			f.vals[s.save] = uintptr(*(*uint16)(s.p))
			continue
		case kindFailMode:
			if f.vals[s.a[0]]&syscall.S_IFMT == s.a[1] {
				return i, s.a[2]
			}
			continue
		case kindExpect:
			if f.vals[s.a[0]] != s.a[1] {
				return i, s.a[2]
			}
			continue
		case kindExitErrno:
			if ws := f.vals[s.a[0]]; ws != 0 {
				if ws&0x7f == 0 && (ws>>8)&0xff != 0 {
					return i, (ws >> 8) & 0xff
				}
				return i, s.a[2]
			}
			continue
		case kindRetry:
			if lastErr != s.a[1] {
				continue
			}
			if f.vals[s.a[3]] >= s.a[2] {
				return i, s.a[1]
			}
			f.vals[s.a[3]]++
			i = int(s.a[0]) - 1
			continue
		case kindSpawnNet:
			// A process that shares init's memory and fds, on a stack
			// of its own; it reports by its exit status (see netMain).
			pid, e := rawClone(syscall.SYS_CLONE, syscall.CLONE_VM|syscall.CLONE_FILES|uintptr(syscall.SIGCHLD), f.netStack, uintptr(unsafe.Pointer(&f.netArg)))
			if e != 0 {
				return i, e
			}
			f.vals[s.save] = pid
			continue
		}
		a := s.a
		for j := 0; j < 6; j++ {
			if s.ref&(1<<j) != 0 {
				a[j] = f.vals[a[j]]
			}
		}
		r, _, e := syscall.RawSyscall6(s.nr, a[0], a[1], a[2], a[3], a[4], a[5])
		lastErr = uintptr(e)
		if e != 0 {
			if s.skip != 0 && uintptr(e) == uintptr(s.skip) {
				skipping = s.group
				continue
			}
			if s.ok == 0 || uintptr(e) != uintptr(s.ok) {
				return i, uintptr(e)
			}
			r = 0
		}
		if s.save != 0 {
			f.vals[s.save] = r
		}
	}
	return -1, 0
}

// childMain is the sandbox's PID 1 in a direct start.
//
//go:nosplit
//go:norace
func childMain(f *forkState) {
	// The go-ahead: moat has written the uid and gid maps and (with
	// shareVM) the plan. End of file instead means moat has died or given
	// up: there is nobody to report to. The child's own copy of the
	// pipe's write end goes first, or it would never see end of file.
	syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(f.mapW), 0, 0)
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(f.mapFD), uintptr(unsafe.Pointer(&f.goByte[0])), 1)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 || n != 1 {
			rawExit(1)
		}
		break
	}
	if f.needResets {
		if i, e := f.run(f.resets); i >= 0 {
			f.fail(f.resets[i].stage, e, 1)
		}
	}
	if i, e := f.run(f.setup); i >= 0 {
		f.fail(f.setup[i].stage, e, 1)
	}
	var pid uintptr
	if f.share {
		// vfork on a stack of its own: init waits until the command's
		// process has exec'd (or died), and no page is copied.
		p, e := rawClone(syscall.SYS_CLONE, f.cmdFlags, f.cmdStack, uintptr(unsafe.Pointer(&f.cmdArg)))
		if e != 0 {
			f.fail(stageFork, e, 1)
		}
		pid = p
	} else {
		p, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, f.cmdFlags, 0, 0, 0, 0, 0)
		if e != 0 {
			f.fail(stageFork, uintptr(e), 1)
		}
		if p == 0 {
			commandMain(f)
		}
		pid = p
	}
	f.cmdPid = pid
	f.rec[0], f.rec[3] = recStarted, uint64(pid)
	f.send()
	// A step that fails here ends init, and with it the command.
	if i, e := f.run(f.post); i >= 0 {
		f.fail(f.post[i].stage, e, 1)
	}
	f.serve()
}

// commandMain runs the exec steps: each execve that fails with ENOENT
// tries the next candidate of the PATH search; the first other error is
// the one reported, as a shell does.
//
//go:nosplit
//go:norace
func commandMain(f *forkState) {
	var first uintptr
	steps := f.exec
	for i := 0; i < len(steps); i++ {
		s := &steps[i]
		r, _, e := syscall.RawSyscall6(s.nr, s.a[0], s.a[1], s.a[2], s.a[3], s.a[4], s.a[5])
		_ = r
		if e == 0 {
			continue
		}
		if s.nr != syscall.SYS_EXECVE {
			f.fail(s.stage, uintptr(e), 127)
		}
		if first == 0 && e != syscall.ENOENT {
			first = uintptr(e)
		}
		if i == len(steps)-1 {
			if first == 0 {
				first = uintptr(e)
			}
			code := uintptr(126)
			if first == uintptr(syscall.ENOENT) {
				code = 127
			}
			f.fail(s.stage, first, code)
		}
	}
	rawExit(127)
}

// serve reaps until the command has exited, forwarding the signals the
// host sends on the control pipe to the command's process group; then it
// kills and reaps what is left in the PID namespace, reports the command's
// wait status with the resource usage of all it reaped, waits for the host
// to close the control pipe, and exits.
//
//go:nosplit
//go:norace
func (f *forkState) serve() {
	const pollIn = 0x1
	f.pollFDs[0] = pollFD{fd: int32(f.vals[f.sigFD]), events: pollIn}
	f.pollFDs[1] = pollFD{fd: int32(f.ctlFD), events: pollIn}
	n := uintptr(2)
	done := false
	for !done {
		_, _, e := syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&f.pollFDs[0])), n, 0, 0, 0, 0)
		if e != 0 && e != syscall.EINTR {
			rawExit(1)
		}
		if n == 2 && f.pollFDs[1].revents != 0 {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(f.ctlFD), uintptr(unsafe.Pointer(&f.ctlBuf[0])), 1)
			switch {
			case e == syscall.EINTR || e == syscall.EAGAIN:
			case e != 0 || r == 0:
				n = 1 // end of file: nothing more to forward
			case f.ctlBuf[0] == ctlSignal:
				r, _, e = syscall.RawSyscall(syscall.SYS_READ, uintptr(f.ctlFD), uintptr(unsafe.Pointer(&f.ctlBuf[1])), 1)
				if e == 0 && r == 1 {
					syscall.RawSyscall(syscall.SYS_KILL, -f.cmdPid, uintptr(f.ctlBuf[1]), 0)
				}
			}
		}
		if f.pollFDs[0].revents != 0 {
			syscall.RawSyscall(syscall.SYS_READ, f.vals[f.sigFD], uintptr(unsafe.Pointer(&f.sigBuf[0])), uintptr(len(f.sigBuf)))
		}
		// Reap whatever has ended: the command, and orphans re-parented
		// to PID 1.
		for {
			r, _, e := syscall.RawSyscall6(syscall.SYS_WAIT4, ^uintptr(0), uintptr(unsafe.Pointer(&f.ws)), syscall.WNOHANG, 0, 0, 0)
			if e == syscall.EINTR {
				continue
			}
			if e != 0 || r == 0 {
				break
			}
			if r == f.cmdPid {
				f.wstatus = f.ws
				done = true
			}
		}
	}
	// Nothing outlives the command: init kills what is left in the PID
	// namespace (daemons, double forks) and reaps it all before it
	// reports, so that once moat has the report no process of the run is
	// alive but init, which then only exits. moat need not wait for the
	// kernel to tear down init's namespaces (~0.3 ms): init closes its
	// fds first, so moat sees the end of its pipes at once.
	syscall.RawSyscall(syscall.SYS_KILL, ^uintptr(0), uintptr(syscall.SIGKILL), 0)
	for {
		_, _, e := syscall.RawSyscall6(syscall.SYS_WAIT4, ^uintptr(0), uintptr(unsafe.Pointer(&f.ws)), 0x40000000 /* __WALL */, 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			break // ECHILD: none left
		}
	}
	syscall.RawSyscall(syscall.SYS_GETRUSAGE, ^uintptr(0) /* RUSAGE_CHILDREN */, uintptr(unsafe.Pointer(&f.rusage[0])), 0)
	f.rec[0], f.rec[4] = recExit, uint64(uint32(f.wstatus))
	for i := 0; i < len(f.rusage); i++ {
		f.rec[8+i] = f.rusage[i]
	}
	if f.scratch != 0 {
		// Under a disk limit: the space left once nothing writes any more.
		_, _, e := syscall.RawSyscall(syscall.SYS_FSTATFS, f.vals[f.scratch], uintptr(unsafe.Pointer(&f.statfs)), 0)
		if e == 0 {
			f.rec[26], f.rec[27] = f.statfs.Bavail*uint64(f.statfs.Bsize), 1
			f.rec[28], f.rec[29] = f.statfs.Ffree, f.statfs.Files
		}
	}
	f.send()
	if n == 2 && f.ctlFD > 0 && f.closeAllBut(f.ctlFD) {
		// The control pipe is open: init exits only once moat has
		// closed it, at the end of its Run or (the CLI) when moat itself
		// exits. In the latter case, moat's exit then leaves to init the
		// teardown of the memory they share (~0.2 ms), and init's own
		// exit no longer competes with moat's for a CPU. moat's death
		// closes the pipe too, so the parent-death signal, which would
		// end init as soon as moat's exit began, is no longer needed:
		// every other process of the run is gone.
		syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, 0, 0)
		f.pollFDs[1].events = 0 // POLLHUP is reported regardless
		for {
			_, _, e := syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&f.pollFDs[1])), 1, 0, 0, 0, 0)
			if e != syscall.EINTR {
				break
			}
		}
	}
	// Every fd, the status pipe and stdout and stderr included: an fd
	// left to exit_group is released only after the namespaces.
	syscall.RawSyscall(sysCloseRange, 0, ^uintptr(0)>>32, 0)
	rawExit(0)
}

// closeAllBut closes every fd but keep; false if it could not (the host
// would then wait for the end of pipes init holds open).
//
//go:nosplit
//go:norace
func (f *forkState) closeAllBut(keep int) bool {
	_, _, e1 := syscall.RawSyscall(sysCloseRange, 0, uintptr(keep-1), 0)
	_, _, e2 := syscall.RawSyscall(sysCloseRange, uintptr(keep+1), ^uintptr(0)>>32, 0)
	return e1 == 0 && e2 == 0
}

// stageFork is the stage reported when init cannot fork the command.
const stageFork = 0

// sysCloseRange is close_range's number, the same on amd64 and arm64
// (the syscall package predates it).
const sysCloseRange = 436
