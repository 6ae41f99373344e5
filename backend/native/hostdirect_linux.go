package native

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/seccomp"
)

// startDirect starts the run without the init stage (see direct_linux.go):
// it builds the plan, forks the child into the new namespaces, writes its
// uid and gid maps, puts it in the cgroup, id-maps the trees and gives it
// the go-ahead. ctl is the control pipe's read end, the child's.
func (r *run) startDirect(filters [][]seccomp.Instruction, trees map[string]*os.File, idmapped chan error, ctl, statW, outW, errW *os.File) error {
	spec := r.spec
	var closeAfter []*os.File // the child's ends, closed here once it has them
	forked := false
	defer func() {
		for _, f := range closeAfter {
			f.Close()
		}
		if !forked {
			// No child: what was kept for it goes now.
			for _, f := range r.afterWait {
				f()
			}
			r.afterWait = nil
		}
	}()
	closeAfter = append(closeAfter, ctl, statW, outW, errW)

	var stdin *os.File
	switch in := r.stdio.Stdin.(type) {
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			return fmt.Errorf("stdin: %w", err)
		}
		stdin = f
		closeAfter = append(closeAfter, f)
	case *os.File:
		stdin = in
	default:
		pr, pw, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("stdin pipe: %w", err)
		}
		stdin = pr
		closeAfter = append(closeAfter, pr)
		go func() {
			io.Copy(pw, in)
			pw.Close()
		}()
		r.cleanup = append(r.cleanup, func() { pw.Close() })
	}

	mapR, mapW, err := pipe(false)
	if err != nil {
		return fmt.Errorf("go-ahead pipe: %w", err)
	}
	// moat keeps the go-ahead pipe open until init has been reaped: init
	// checks that it has not hung up (see buildPlan).
	defer mapR.Close()
	r.afterWait = append(r.afterWait, func() { mapW.Close() })

	fds := planFDs{
		mapR: int(mapR.Fd()), mapW: int(mapW.Fd()),
		ctl: int(ctl.Fd()), status: int(statW.Fd()),
		stdio:       [3]int{int(stdin.Fd()), int(outW.Fd()), int(errW.Fd())},
		seccompChan: -1,
		proxyChan:   -1,
		tunDir:      -1,
		trees:       map[string]int{},
		ctty:        r.tty != nil,
	}
	for k, f := range trees {
		fds.trees[k] = int(f.Fd())
	}
	var chanHost *os.File
	if len(filters) > 0 {
		host, child, err := socketPair()
		if err != nil {
			return fmt.Errorf("seccomp listener channel: %w", err)
		}
		chanHost = host
		r.cleanup = append(r.cleanup, func() { host.Close() })
		closeAfter = append(closeAfter, child)
		fds.seccompChan = int(child.Fd())
		if r.stdio.CheckExec != nil || listenChecked(spec) {
			// The filter that carries the exec check carries the listen
			// check too, on the same listener.
			obs, err := execObserved(r.spec, filters)
			if err != nil {
				return err
			}
			fds.observed = obs
			fds.execCheck, fds.listenCheck = r.stdio.CheckExec != nil, listenChecked(spec)
		}
	} else if listenChecked(spec) {
		return errNoListenCheck
	}
	if spec.Network.Mode == backend.NetProxy {
		if r.stdio.ServeProxy == nil {
			return errors.New("network mode proxy needs a proxy to serve it (Stdio.ServeProxy)")
		}
		if spec.Network.TUN != nil && r.stdio.ServeTUN == nil {
			return errors.New("a TUN device needs a network stack to serve it (Stdio.ServeTUN)")
		}
		host, child, err := socketPair()
		if err != nil {
			return fmt.Errorf("proxy channel: %w", err)
		}
		r.cleanup = append(r.cleanup, func() { host.Close() })
		closeAfter = append(closeAfter, child)
		fds.proxyChan = int(child.Fd())
		r.netChan = host
		r.tun = spec.Network.TUN != nil
		if r.tun {
			// Opened here: the plan's network steps may run after init
			// has replaced the root (see openTUN).
			dir, err := os.OpenFile(spec.Network.TUN.DevDir(), unix.O_PATH|unix.O_DIRECTORY, 0)
			if err != nil {
				return fmt.Errorf("TUN device: %w", err)
			}
			closeAfter = append(closeAfter, dir)
			fds.tunDir = int(dir.Fd())
		}
	}
	// The dups onto 0-2 and the closing of everything else assume the
	// fds the child keeps are above 2, which they are unless moat was
	// started with 0-2 closed.
	for _, fd := range []int{fds.mapR, fds.mapW, fds.ctl, fds.status, fds.stdio[1], fds.stdio[2], fds.seccompChan, fds.proxyChan, fds.tunDir} {
		if fd >= 0 && fd < 3 {
			return fmt.Errorf("direct start: fd %d is below 3 (was moat started with stdin, stdout or stderr closed?)", fd)
		}
	}

	f := &forkState{mapFD: fds.mapR, mapW: fds.mapW, share: r.shareVM()}
	f.cmdFlags = commandFlags(f.share)
	if f.share {
		// Three stacks, init's, the command's process's (while it execs)
		// and the network namespace helper's, outside the Go heap;
		// unmapped once init has been reaped.
		const size = 64 << 10
		stk, err := unix.Mmap(-1, 0, 3*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_STACK)
		if err != nil {
			return fmt.Errorf("sandbox init stack: %w", err)
		}
		base := uintptr(unsafe.Pointer(&stk[0]))
		f.stack, f.stackSize, f.cmdStack, f.netStack = base+size, size, base+size, base+3*size
		f.initArg, f.cmdArg, f.netArg = childArg{f: f}, childArg{f: f, command: true}, childArg{f: f, net: true}
		r.afterWait = append(r.afterWait, func() { unix.Munmap(stk) })
	}

	flags := uint64(cloneFlags)
	if spec.Network.Mode != backend.NetHost && !f.share {
		// Without shareVM there is no helper to make it in parallel
		// (see buildPlan): the clone makes it.
		flags |= unix.CLONE_NEWNET
	}
	args := &cloneArgs{flags: flags, exitSignal: uint64(unix.SIGCHLD)}
	cgFD, inCgroup := r.cgFD()
	if inCgroup {
		args.flags |= unix.CLONE_INTO_CGROUP
		args.cgroup = uint64(cgFD)
	}
	type cloned struct {
		pid      uintptr
		errno    syscall.Errno
		inCgroup bool
	}
	clone := func() cloned {
		// clone3 is needed to start in a cgroup, and with shareVM to
		// start without the Go runtime's signal handlers.
		//
		// Init's parent-death signal is tied to the thread that clones
		// it: a thread that outlives the run (see onStartThread). The
		// goroutine is not locked to its thread while it clones:
		// forkDirect cannot be rescheduled between runtimeBeforeFork
		// and the clone (the first raises m.locks), and the first
		// runtime.LockOSThread of a process starts the runtime's
		// template thread, one thread more.
		var c cloned
		r.onInitParent(func() {
			a := *args
			pid, errno := forkDirect(f, &a, inCgroup || f.share)
			if errno == unix.ENOSYS {
				// clone3 refused (a container's seccomp profile): clone,
				// and join the cgroup after.
				a = *args
				a.flags &^= unix.CLONE_INTO_CGROUP
				pid, errno = forkDirect(f, &a, false)
				c = cloned{pid, errno, false}
				return
			}
			c = cloned{pid, errno, inCgroup}
		})
		return c
	}

	rl, err := directRlimits(spec.Limits)
	if err != nil {
		return err
	}
	abi := 0
	if spec.Landlock {
		abi = UsableLandlockABI()
	}
	// The plan comes first: a forked child has a copy of this process's
	// memory as it was. (With shareVM it could be built on another thread
	// while the kernel makes the namespaces, the child waiting for the
	// go-ahead; on this project's two-CPU machines that was no faster.)
	root := os.Geteuid() == 0
	fds.dropGroups = root
	if len(r.nest) > 0 {
		fds.nest = &backend.Identity{UID: r.nest[0].uid, GID: r.nest[0].gid, HostUID: spec.User.HostUID, HostGID: spec.User.HostGID}
	}
	p, err := buildPlan(f, spec, fds, filters, abi, rl)
	if p != nil {
		r.cleanup = append(r.cleanup, p.unmap)
	}
	if err != nil {
		return err
	}
	c := clone()
	if c.errno != 0 {
		return startError(fmt.Errorf("clone: %w", c.errno))
	}
	r.stages = p.stages
	// The child reads the plan (and f, p.f) while the run lasts: with
	// shareVM, from this process's memory.
	r.plan = p
	pid, inCgroup := c.pid, c.inCgroup
	forked = true
	proc := &child{pid: int(pid)}
	r.pid = proc.pid
	r.signal = proc.signal
	r.wait = func() {
		ws := proc.wait()
		r.state = &ws
		for _, f := range r.afterWait {
			f()
		}
		r.afterWait = nil
	}
	abort := func(err error) error {
		proc.signal(syscall.SIGKILL)
		r.wait()
		return err
	}

	// From here on the run is killed and reaped on every path.
	ids := spec.User
	if fds.nest != nil {
		ids = *fds.nest // init's namespace maps the trees' owner (see nestable)
	}
	if err := writeIDMaps(int(pid), ids, root); err != nil {
		return abort(err)
	}
	if fds.nest != nil {
		if err := mapTrees(int(pid), r.nest, spec); err != nil {
			return abort(err)
		}
	}
	if r.cg != nil && !inCgroup {
		if err := r.cg.Add(int(pid)); err != nil {
			return abort(fmt.Errorf("join cgroup: %w", err))
		}
	}
	// The trees have been id-mapping on another thread (see Run).
	err = <-idmapped
	idmapped <- nil
	if err != nil {
		return abort(err)
	}
	if _, err := mapW.Write([]byte{1}); err != nil {
		return abort(fmt.Errorf("start sandbox init: %w", err))
	}
	// The supervisor starts while init builds the root: the listener
	// comes only once init has installed its filters.
	if chanHost != nil {
		stop, stopW, err := pipe(false) // supervise polls stop itself
		if err != nil {
			return abort(fmt.Errorf("supervisor pipe: %w", err))
		}
		r.stopSup = stopW
		r.supDone = make(chan struct{})
		go r.supervise(chanHost, stop, filters[fds.observed])
	}
	return nil
}

// shareVM reports whether this run's init shares moat's address space.
// Not under a memory limit: init sits in the run's memory cgroup, and
// when that cgroup runs out the OOM killer may pick init (its resident
// memory is moat's, often more than the command's, whose tmpfs files are
// in no process), and the kernel then kills every process that shares
// the victim's memory, moat included: the run would end with no report.
// A forked init has memory of its own, and its death ends only the run.
func (r *run) shareVM() bool {
	return shareVM && !r.forkStart && r.spec.Limits.MemoryBytes == 0
}

// child is a process the host cloned itself (the direct start's init). It
// is signalled by pid only while it has not been reaped, so that a signal
// never reaches a process that has reused the pid. (os.FindProcess would
// give the same guarantee with a pidfd, but its first use in a process
// probes for pidfd support by forking a child: ~0.4 ms of a run's start
// here.)
type child struct {
	pid    int
	mu     sync.Mutex
	reaped bool
}

func (c *child) signal(s syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reaped {
		syscall.Kill(c.pid, s)
	}
}

// wait waits for the child to end and reaps it. It waits without reaping
// first, so that a signal sent meanwhile still finds the child's pid its
// own (a zombie's).
func (c *child) wait() syscall.WaitStatus {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, c.pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(c.pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	c.reaped = true
	return ws
}

// writeIDMaps maps the sandbox user to its host uid and gid in the
// child's user namespace, as os/exec does for the init stage.
//
// setgroups(2) stays allowed there when moat is root (allowGroups), so
// that init can drop the supplementary groups it has from moat: a host
// group such as root's own (0), adm or docker would otherwise go with the
// command's unprivileged host uid, and open what that group may read.
// Nothing in the sandbox holds CAP_SETGID after init's first steps, so
// none can set groups again. An ordinary caller's namespace must deny it:
// the kernel maps a group for an unprivileged writer only then, because a
// process that could drop a group could escape a permission that denies
// that group; the command keeps the caller's groups (docs/security.md).
func writeIDMaps(pid int, u backend.Identity, allowGroups bool) error {
	dir, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("start sandbox init: open /proc/%d: %w", pid, err)
	}
	defer unix.Close(dir)
	// Plain system calls: an os.File would try (and fail) to add each
	// /proc file to the poller, and look the pid up again each time.
	write := func(name, s string) error {
		fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			_, err = unix.Write(fd, []byte(s))
			if cerr := unix.Close(fd); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("start sandbox init: write %s: %w", name, err)
		}
		return nil
	}
	if err := write("uid_map", fmt.Sprintf("%d %d 1\n", u.UID, u.HostUID)); err != nil {
		return err
	}
	if !allowGroups {
		if err := write("setgroups", "deny"); err != nil {
			return err
		}
	}
	return write("gid_map", fmt.Sprintf("%d %d 1\n", u.GID, u.HostGID))
}

// mapTrees id-maps the trees with the user namespace of init (pid), whose
// maps have been written: the nested identity (see nestable).
func mapTrees(pid int, maps []idmap, spec *backend.Spec) error {
	path := "/proc/" + strconv.Itoa(pid) + "/ns/user"
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("start sandbox init: open %s: %w", path, err)
	}
	ns := os.NewFile(uintptr(fd), path)
	defer ns.Close()
	for _, m := range maps {
		if err := mapTree(m, ns, spec); err != nil {
			return err
		}
	}
	return nil
}

// supervise receives the observed filter's listener from the child and
// answers its notifications until the run ends.
func (r *run) supervise(ch, stop *os.File, prog []seccomp.Instruction) {
	defer close(r.supDone)
	defer stop.Close()
	fd, ok := receiveFD(ch)
	if !ok {
		return
	}
	defer unix.Close(fd)
	sup := &seccomp.Supervisor{Prog: prog, Record: r.seen.record, Setsid: r.onSetsid}
	if r.stdio.CheckExec != nil {
		// A session's first exec is not its command's (see attribute).
		// With CheckFirstExec the direct start notifies the command's own
		// exec too, which is then the first: nothing else in the sandbox
		// runs before the command.
		sup.Exec = execChecker(r.stdio.CheckExec, (r.initSupervised || r.spec.CheckFirstExec) && r.sessChild == nil)
	}
	sup.Serve(fd, int(stop.Fd()))
}

// receiveFD receives one fd sent over a unix socket with SCM_RIGHTS (one
// byte of data with it); false if the sender closed the socket first.
func receiveFD(sock *os.File) (int, bool) {
	fds, ok := receiveFDs(sock, 1)
	if !ok {
		return -1, false
	}
	return fds[0], true
}

// receiveFDs receives exactly n fds sent in one message over a unix socket
// with SCM_RIGHTS (one byte of data with them); false if the sender closed
// the socket first or sent another number.
func receiveFDs(sock *os.File, n int) ([]int, bool) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*n))
	k, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil || k == 0 {
		return nil, false
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, false
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != n {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, false
	}
	return fds, true
}

// stopSupervisor ends supervise, once the run is over.
func (r *run) stopSupervisor() {
	if r.stopSup != nil {
		r.stopSup.Close()
		// The command is dead: nothing more is refused. A caller that
		// exits next need not wait for the supervisor's thread to wake
		// and end (~50 µs).
		if !r.exitAfter {
			<-r.supDone
		}
	}
}

// readRecords turns a direct start's records into messages.
// diskSize is the run's disk limit, to tell from the space left on its
// tmpfs whether it was filled.
func readRecords(rd io.Reader, out chan<- message, stages []stageInfo, diskSize int64) {
	defer close(out)
	var rec record
	b := make([]byte, unsafe.Sizeof(rec))
	for {
		if _, err := io.ReadFull(rd, b); err != nil {
			return
		}
		for i := range rec {
			rec[i] = binary.NativeEndian.Uint64(b[8*i:])
		}
		switch rec[0] {
		case recError:
			m := message{Type: "error", Errno: int(rec[2]), Err: syscall.Errno(rec[2]).Error()}
			if int(rec[1]) < len(stages) {
				m.Stage = stages[rec[1]].name
				if e := stages[rec[1]].err; e != "" {
					m.Err = e
				}
				if g := stages[rec[1]].gone; g != "" && syscall.Errno(rec[2]) == syscall.ENOENT {
					m.Gone = g
				}
			}
			out <- m
		case recStarted:
			out <- message{Type: "started", Pid: int(rec[3])}
		case recExit:
			// struct rusage: ru_utime and ru_stime (timevals), ru_maxrss.
			ru := rec[8:]
			out <- message{
				Type:       "exit",
				WaitStatus: uint32(rec[4]),
				UserNanos:  int64(ru[0])*1e9 + int64(ru[1])*1e3,
				SysNanos:   int64(ru[2])*1e9 + int64(ru[3])*1e3,
				MaxRSSKiB:  int64(ru[4]),
				DiskFull:   rec[27] == 1 && (diskFull(int64(rec[26]), diskSize) || inodesFull(rec[28], rec[29])),
			}
		}
	}
}

// startHolderVM clones holdUsernsVM's child into a new user namespace, on
// a stack of its own; reaped releases the stack once the child has been
// reaped.
func startHolderVM(onParent func(func())) (pid int, reaped func(), err error) {
	const size = 16 << 10
	stk, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_STACK)
	if err != nil {
		return 0, nil, fmt.Errorf("start user namespace holder: %w", err)
	}
	arg := &childArg{hold: true, ppid: os.Getpid()}
	var p, e uintptr
	onParent(func() {
		// No runtime.LockOSThread: see startDirect.
		runtimeBeforeFork()
		p, e = rawClone(syscall.SYS_CLONE, unix.CLONE_NEWUSER|syscall.CLONE_VM|uintptr(syscall.SIGCHLD), uintptr(unsafe.Pointer(&stk[0]))+size, uintptr(unsafe.Pointer(arg)))
		runtimeAfterFork()
	})
	if e != 0 {
		unix.Munmap(stk)
		return 0, nil, fmt.Errorf("start user namespace holder: %w", syscall.Errno(e))
	}
	return int(p), func() {
		runtime.KeepAlive(arg)
		unix.Munmap(stk)
	}, nil
}

// holdUsernsVM is idmapUserns' holder on amd64: a child cloned into a new
// user namespace that shares this process's memory (as the direct
// start's init does, see forkDirect) and does nothing but wait, with
// every signal blocked, to be killed; it dies with moat too (its
// parent-death signal). Its stack is unmapped once it has been reaped.
// onParent runs its clone on a thread that outlives it (see
// onStartThread).
func holdUsernsVM(uid, gid, hostUID, hostGID int, onParent func(func())) (*os.File, error) {
	pid, reaped, err := startHolderVM(onParent)
	if err != nil {
		return nil, err
	}
	err = writeIDMaps(pid, backend.Identity{UID: uid, GID: gid, HostUID: hostUID, HostGID: hostGID}, false)
	var f *os.File
	if err == nil {
		f, err = os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	}
	syscall.Kill(pid, syscall.SIGKILL)
	// Reaping waits for the kernel to tear the process down; the run
	// does not need to wait for that.
	go func() {
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
		reaped()
	}()
	if err != nil {
		return nil, fmt.Errorf("user namespace holder: %w", err)
	}
	return f, nil
}
