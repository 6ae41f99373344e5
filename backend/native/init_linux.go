package native

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/lookpath"
	"github.com/moatbox/moat/internal/seccomp"
)

// IsInit reports whether this process was started as a sandbox's init
// stage: the backend re-executes the running binary to become the
// sandbox's PID 1, and this package's init function then runs that stage
// instead of returning (see init below).
func IsInit() bool {
	return len(os.Args) > 0 && (os.Args[0] == initArg0 || os.Args[0] == usernsArg0)
}

// init runs the init stage (and never returns) when this process is a
// sandbox's init, from this package's initialisation: Go initialises a
// package after those it imports and before those that import it, so a
// sandbox start skips initialising what only the host side uses (net/http,
// crypto/tls, x509, the egress proxy, the CLI).
func init() {
	MaybeInit()
}

// MaybeInit runs the init stage and never returns when this process is a
// sandbox's init; otherwise it returns at once. The package's own init
// already calls it; calling it again first thing in main is harmless.
func MaybeInit() {
	if !IsInit() {
		return
	}
	if os.Args[0] == usernsArg0 {
		// Only held for its user namespace; the host kills it.
		for {
			time.Sleep(time.Hour)
		}
	}
	runInit()
}

// commandStderr is the fd holding the stderr the command gets: the one
// init was started with (runInit moves it).
var commandStderr uintptr = 2

// stageError is a setup failure inside init, sent to the host as data.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.stage + ": " + e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

func fail(stage string, err error) error { return &stageError{stage, err} }

// runInit is PID 1 of the sandbox. It runs as the sandbox user with the
// capabilities it needs (as ambient capabilities within the new user
// namespace only), and gives every one of them up before the command runs.
func runInit() {
	// The command's stderr moves out of the way, and init's own becomes
	// the host's crash pipe: nothing init's runtime prints as it dies
	// reaches the command's stderr (see fdCrash).
	cmdStderr, err := unix.FcntlInt(2, unix.F_DUPFD_CLOEXEC, 10)
	if err == nil {
		err = unix.Dup3(fdCrash, 2, 0)
	}
	if err != nil {
		os.Exit(1) // the host reports init's exit without a message
	}
	unix.Close(fdCrash)
	commandStderr = uintptr(cmdStderr)
	status := os.NewFile(fdStatus, "status")
	send := func(m message) {
		status.Write(encodeMessage(&m))
	}
	if err := initMain(send); err != nil {
		m := message{Type: "error", Stage: "init", Err: err.Error()}
		var se *stageError
		if errors.As(err, &se) {
			m.Stage, m.Err = se.stage, se.err.Error()
		}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			m.Errno = int(errno)
		}
		var gone *backend.GoneError
		if errors.As(err, &gone) {
			m.Gone = gone.Path
		}
		send(m)
		os.Exit(1)
	}
	os.Exit(0)
}

func initMain(send func(message)) error {
	// The network namespace is made on a thread of its own from the start
	// (see newNetNS); the Spec says the same as argv.
	var netns chan netNS
	if len(os.Args) > 1 && os.Args[1] == argNetNS {
		netns = make(chan netNS, 1)
		go newNetNS(netns)
	}
	// Everything per-thread that the command must inherit is done on this
	// thread, and the command is forked from it.
	runtime.LockOSThread()
	// The go-ahead: the host writes the Spec only once init is in its
	// cgroups, so reading it is the synchronisation point.
	f := os.NewFile(fdSpec, "spec")
	b, err := readFrame(f)
	if err != nil {
		return fail("read spec", err)
	}
	is, err := decodeInitSpec(b)
	if err != nil {
		return fail("read spec", err)
	}
	// The command inherits this thread's timer slack: moat's own, not the
	// one its entry point raised for the start (see package rt0).
	if is.TimerSlack != 0 {
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(is.TimerSlack), 0, 0, 0)
	}
	// The command's signals come from the host on the same pipe (see
	// forwarder), not through handlers of init's own: installing those
	// with os/signal cost every run ~0.4 ms. Init is in a process group
	// of its own, so the terminal's signals reach moat and not init.
	fwd := &forwarder{}
	go fwd.serve(f, is.Control)
	spec := is.Spec
	if spec == nil || len(spec.Args) == 0 && is.SessionFD == 0 {
		return fail("read spec", errors.New("empty spec"))
	}
	if (netns != nil) != (spec.Network.Mode != backend.NetHost) {
		return fail("read spec", errors.New("the Spec's network mode does not match init's arguments"))
	}

	// The TUN clone device is found in the host's /dev, before the root
	// is replaced; it is opened once init is in the new namespace.
	tunDirFD := -1
	if spec.Network.TUN != nil {
		if spec.Network.Mode != backend.NetProxy {
			return fail("read spec", errors.New("a TUN device needs network mode proxy"))
		}
		if tunDirFD, err = unix.Open(spec.Network.TUN.DevDir(), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return fail("TUN device", fmt.Errorf("open %s: %w", spec.Network.TUN.DevDir(), err))
		}
	}

	// The root is built before anything else, while init still holds
	// CAP_SYS_ADMIN in its user namespace.
	if err := buildRoot(spec, is.Trees); err != nil {
		return err
	}
	if netns != nil {
		// This thread enters the new network namespace: the command is
		// forked from it and inherits it, and the proxy listener is bound
		// on it. Init's other threads stay in the host's, out of the
		// command's sight: /proc is mounted with hidepid=2 (see
		// mountProc), and init, no longer dumpable by then, is invisible
		// with all its threads, so no /proc/1/task/*/net or /proc/TID/net
		// shows the host's interfaces. Moving every thread instead would
		// stop them all once more (about 0.3 ms).
		ns := <-netns
		if ns.err != nil {
			return fail("network namespace", ns.err)
		}
		err := unix.Setns(ns.fd, unix.CLONE_NEWNET)
		unix.Close(ns.fd)
		if err != nil {
			return fail("enter network namespace", err)
		}
	}
	for _, fd := range is.Trees {
		unix.Close(fd)
	}
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return fail("sethostname", err)
		}
	}
	tunFD := -1
	if tunDirFD >= 0 {
		if tunFD, err = tunInNamespace(tunDirFD, spec.Network.TUN); err != nil {
			return fail("TUN device", err)
		}
	}
	if is.NetFD != 0 {
		if err := sendProxyListener(is.NetFD, spec.Network.ProxyPort, tunFD); err != nil {
			return fail("proxy listener", err)
		}
	}

	var path string
	if is.SessionFD == 0 {
		path, err = lookPath(spec.Args[0], spec.Env)
		if err != nil {
			return fail("exec "+spec.Args[0], err)
		}
	}

	// Rlimits are per process and inherited: set them on init, whose own
	// use of CPU and files is tiny, so the command starts with them.
	if err := setRlimits(spec.Limits, is.SessionFD != 0); err != nil {
		return err
	}

	// From here on init gives up its power, in this order: it is no longer
	// dumpable (the command runs as the same uid and must not read init's
	// memory or open its fds through /proc/1), then every capability goes
	// (bounding set first, which needs CAP_SETPCAP, then the
	// rest), then no_new_privs so no later exec can gain any back. These
	// are per-thread attributes: each is applied to all of init's threads
	// at once (except the bounding set and Landlock, see there), and the
	// command inherits them from this locked thread through fork.
	oomAdj := oomScore{fd: -1}
	if is.SessionFD != 0 && spec.Limits.MemoryBytes > 0 {
		oomAdj = openOOMAdj()
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail("set non-dumpable", err)
	}
	if err := dropCapabilities(); err != nil {
		return fail("drop capabilities", err)
	}
	// no_new_privs goes on this thread first (Landlock and seccomp need
	// it); the seccomp filters' TSYNC below then sets it on every other
	// thread of init, which saves stopping them all once more. Without a
	// filter it is set on all of them here.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail("set no_new_privs", err)
	}
	if len(is.Filters) == 0 {
		if err := allThreads(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
			return fail("set no_new_privs", err)
		}
	}
	if spec.Landlock {
		if err := restrictLandlock(spec); err != nil {
			return fail("landlock", err)
		}
	}
	// Seccomp comes last, so that nothing above needs a system call the
	// filters refuse; TSYNC puts it on every thread of init, and the
	// command inherits it through fork. What init does afterwards (fork,
	// exec, wait, kill, write) is allowed by every moat profile.
	var seen denials
	// A custom profile goes on last, as in the direct start, where the
	// command installs it after inheriting the others: installing the
	// floor needs prctl and seccomp, which the profile may refuse, and
	// among filters that answer a call alike the kernel takes the last
	// one's errno.
	order := make([]int, 0, len(is.Filters))
	for i := range is.Filters {
		order = append(order, i)
	}
	if spec.SeccompAtExec && len(order) > 1 {
		order = append(order[1:], 0)
	}
	for _, i := range order {
		raw := is.Filters[i]
		prog, err := decodeFilter(raw)
		if err != nil {
			return fail(fmt.Sprintf("install seccomp filter %d", i+1), err)
		}
		if oomAdj.fd >= 0 && len(initStageRefusalsOf(prog, []int{unix.SYS_PWRITE64})) > 0 {
			// A custom profile that refuses it: no write that would
			// show as a denial.
			unix.Close(oomAdj.fd)
			oomAdj.fd = -1
		}
		if i == 0 && spec.SeccompAtExec {
			// The init stage cannot run code of its own between fork and
			// exec, so a custom profile goes on init too, which then runs
			// on under it: a profile that refuses what init's Go code
			// needs would crash the runtime, so it fails here instead.
			if refused := initStageRefusals(prog, is.SessionFD != 0); len(refused) > 0 {
				why := "it starts runs with an overlay workspace under a disk limit); allow them, or run without the disk limit"
				if is.SessionFD != 0 {
					why = "it starts every session's commands); allow them"
				}
				return fail("install seccomp filter 1", fmt.Errorf("the profile refuses %s, which moat's init stage needs after installing it (%s", strings.Join(refused, ", "), why))
			}
		}
		if i == 0 && is.ExecFD != 0 {
			n := seccomp.Notify{Exec: !is.SetsidOnly && !is.ListenOnly, Setsid: is.SetsidOnly || is.SessionFD != 0 && !is.ListenOnly, Listen: is.Listen}
			if err := installExecChecked(prog, is.ExecFD, n); err != nil {
				return fail("install seccomp filter 1", err)
			}
			continue
		}
		// The first filter is observed, so the report can say what it
		// refused: init answers each refused call itself (see
		// seccomp.Observed), unless the filter would refuse init that.
		if i == 0 && seccomp.SupervisorAllowed(prog, seccomp.NativeArch()) {
			fd, err := seccomp.InstallObserved(prog)
			if err != nil {
				return fail("install seccomp filter 1", err)
			}
			go seccomp.Supervise(fd, prog, seen.record)
			continue
		}
		if err := seccomp.Install(prog); err != nil {
			return fail(fmt.Sprintf("install seccomp filter %d", i+1), err)
		}
	}

	// setsid: the command gets a session of its own, so TIOCSTI cannot
	// push keystrokes into the caller's shell; its controlling terminal,
	// if any, is the pty the host made for it (Terminal), its stdin.
	// Only fds 0-2 are inherited: every other fd init has, whoever opened
	// it, is marked close-on-exec here.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail("close inherited fds", err)
	}
	if is.SessionFD != 0 {
		// A session's init forks each command from here, from this
		// thread, as below (see session_init_linux.go).
		return serveSession(is.SessionFD, &seen, send, oomAdj)
	}
	pid, err := syscall.ForkExec(path, spec.Args, &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   spec.Env,
		Files: []uintptr{0, 1, commandStderr},
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: is.Terminal, Ctty: 0},
	})
	if err != nil {
		return fail("exec "+spec.Args[0], err)
	}
	// Only now, with the command exec'd with every signal at its
	// default, init ignores those that the Go runtime would otherwise
	// end it on: the command (or anything else) sending PID 1 SIGTERM,
	// SIGINT or SIGQUIT must not end the run behind its back. (An ignored
	// signal stays ignored across fork and exec, so this cannot come
	// first.)
	signal.Ignore(fatalSignals...)
	// Those a fault raises the runtime crashes on when they are sent
	// (kill) too, ignored or not: relayed and dropped. (A command that
	// crashed init so lost its exit status, its seccomp denials and, under
	// a disk limit, its changes.)
	faults := make(chan os.Signal, 8)
	signal.Notify(faults, unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE, unix.SIGILL, unix.SIGTRAP)
	go func() {
		for range faults {
		}
	}()
	fwd.started(pid)
	send(message{Type: "started", Pid: pid})

	ws, err := reap(pid)
	if err != nil {
		return fail("wait", err)
	}
	exit := message{Type: "exit", WaitStatus: uint32(ws)}
	if disk != nil {
		// Nothing may still be writing while the changes are saved.
		syscall.Kill(-1, syscall.SIGKILL)
		for {
			if _, err := unix.Wait4(-1, nil, 0, nil); err == unix.ECHILD {
				break
			}
		}
		exit.DiskFull = disk.full()
		// The merge runs on another thread: this one is in the command's
		// Landlock domain, which does not reach the change set.
		done := make(chan error)
		go func() { done <- disk.merge() }()
		if err := <-done; err != nil {
			exit.MergeErr = err.Error()
		}
	}
	exit.Denials = seen.list()
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_CHILDREN, &ru)
	exit.UserNanos, exit.SysNanos, exit.MaxRSSKiB = ru.Utime.Nano(), ru.Stime.Nano(), ru.Maxrss
	send(exit)
	// Returning makes init exit; the kernel then kills every process left
	// in the PID namespace (daemons, double-forked and setsid-ed children).
	return nil
}

// fatalSignals are those the Go runtime ends a process on when nothing
// handles them: SIGHUP, SIGINT and SIGTERM exit, SIGQUIT, SIGABRT,
// SIGSYS and SIGSTKFLT dump the goroutines and exit. PID 1 of a namespace
// receives a signal only when it has a handler, and the runtime installs
// its own for all of these. The rest it ignores when unhandled, or leaves
// at the default, which the kernel does not deliver to PID 1.
var fatalSignals = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGTERM, unix.SIGQUIT, unix.SIGABRT,
	unix.SIGSYS, unix.SIGSTKFLT,
}

// forwarder passes the signals the host sends on the spec pipe after the
// Spec (ctlSignal and a number) to the command's process group, holding
// those that arrive before the command exists; for a run with changes to
// save, ctlStop stops everything but init. End of file (the host closing
// the pipe at the end of the run) changes nothing.
type forwarder struct {
	mu      sync.Mutex
	pid     int
	pending []syscall.Signal
	// stopped: a ctlStop came; a command started after it is killed at
	// once (before, one that came before the command existed killed
	// nothing, and the command ran to its end).
	stopped bool
}

func (fw *forwarder) serve(f *os.File, control bool) {
	defer f.Close()
	var b [2]byte
	for {
		if _, err := io.ReadFull(f, b[:1]); err != nil {
			return
		}
		switch b[0] {
		case ctlStop:
			if control {
				fw.mu.Lock()
				fw.stopped = true
				syscall.Kill(-1, syscall.SIGKILL)
				fw.mu.Unlock()
			}
		case ctlSignal:
			if _, err := io.ReadFull(f, b[1:]); err != nil {
				return
			}
			fw.signal(syscall.Signal(b[1]))
		}
	}
}

func (fw *forwarder) signal(s syscall.Signal) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.pid == 0 {
		fw.pending = append(fw.pending, s)
		return
	}
	// The command leads its own process group: signal all of it.
	syscall.Kill(-fw.pid, s)
}

// started delivers what was held, in order.
func (fw *forwarder) started(pid int) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.pid = pid
	if fw.stopped {
		syscall.Kill(-1, syscall.SIGKILL)
		return
	}
	for _, s := range fw.pending {
		syscall.Kill(-pid, s)
	}
	fw.pending = nil
}

// reap waits for every child init has (orphans are re-parented to PID 1)
// until the command itself has exited, and returns its wait status.
func reap(pid int) (unix.WaitStatus, error) {
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if wpid == pid {
			return ws, nil
		}
	}
}

// allThreads runs a per-thread system call on every thread of init.
// It needs a binary built with CGO_ENABLED=0; with cgo the runtime refuses,
// and init fails closed rather than leave a thread privileged.
func allThreads(trap, a1, a2, a3 uintptr) error {
	_, _, errno := syscall.AllThreadsSyscall(trap, a1, a2, a3)
	if errno == syscall.ENOTSUP {
		return errors.New("cannot change all threads: this binary was built with cgo; build moat with CGO_ENABLED=0")
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// dropCapabilities empties the bounding set of the calling thread (which
// must be locked: it is the one that forks the command, and a child
// inherits the bounding set of the thread that forked it), then clears
// the ambient, effective, permitted and inheritable sets of every thread.
// The bounding set is per-thread too, but emptying it on all threads
// would stop every thread once per capability (about 2 ms per run); on
// the other threads it guards nothing, since they hold no capabilities
// once capset below has run and never exec.
func dropCapabilities() error {
	// Every possible capability number: the kernel answers EINVAL beyond
	// its last one, which costs less than reading cap_last_cap.
	for c := 0; c < 64; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("bounding set cap %d: %w", c, err)
		}
	}
	// Emptying the permitted and inheritable sets empties the ambient set
	// too (the kernel keeps ambient a subset of both), so one stop of all
	// threads does it all.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := allThreads(unix.SYS_CAPSET, uintptr(ptr(&hdr)), uintptr(ptr(&data[0])), 0); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

func setRlimits(l backend.Limits, session bool) error {
	set := func(name string, res int, v uint64) error {
		var cur unix.Rlimit
		if err := unix.Getrlimit(res, &cur); err != nil {
			return fail("rlimit "+name, err)
		}
		// An rlimit can only be lowered without CAP_SYS_RESOURCE; a
		// request above the hard limit is enforced at the (stricter)
		// hard limit.
		if v > cur.Max {
			v = cur.Max
		}
		r := unix.Rlimit{Cur: v, Max: v}
		if res == unix.RLIMIT_CPU && v < cur.Max {
			// One second of grace between SIGXCPU and SIGKILL lets a
			// program that handles SIGXCPU report it.
			r.Max = v + 1
		}
		if err := unix.Setrlimit(res, &r); err != nil {
			return fail("rlimit "+name, err)
		}
		return nil
	}
	if err := set("core", unix.RLIMIT_CORE, 0); err != nil {
		return err
	}
	if l.CPUTime > 0 {
		secs := uint64((l.CPUTime + 999_999_999) / 1_000_000_000)
		if err := set("cpu", unix.RLIMIT_CPU, secs); err != nil {
			return err
		}
	}
	if l.OpenFiles > 0 {
		if err := set("open files", unix.RLIMIT_NOFILE, l.OpenFiles); err != nil {
			return err
		}
	}
	if l.FileSize > 0 {
		if err := set("file size", unix.RLIMIT_FSIZE, l.FileSize); err != nil {
			return err
		}
	}
	// Set here, in the sandbox's user namespace, not before it was made:
	// the kernel also holds the caller's uid on the host to the
	// RLIMIT_NPROC its creator had, which would count the caller's every
	// process against the sandbox's limit (see backend.PidsRlimit).
	//
	// It counts init's own threads too: a session's init takes
	// initSpareTasks more, and its host lowers that to what init holds
	// once it is ready (spareInitTasks).
	if l.PidsRlimit && l.Pids > 0 {
		n := uint64(l.Pids)
		if session {
			n += initSpareTasks
		}
		if err := set("processes", unix.RLIMIT_NPROC, n); err != nil {
			return err
		}
	}
	return nil
}

// initSpareTasks bounds the threads a session's init may hold besides its
// commands' pids limit until its host sets it to those it holds.
const initSpareTasks = 256

// netNS is a new network namespace, by fd.
type netNS struct {
	fd  int
	err error
}

// newNetNS makes the sandbox's network namespace, with loopback up, and
// sends its fd. Creating one registers the kernel's per-namespace state
// (sysctl tables, devices: about 0.4 ms here), so init does it on a
// thread of its own while it builds the root, instead of in the clone
// that starts it, where it held up everything. The thread is left in the
// new namespace and so never returns to the Go scheduler: the goroutine
// ends locked, and the runtime ends the thread with it.
func newNetNS(out chan<- netNS) {
	runtime.LockOSThread()
	fd, err := func() (int, error) {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return -1, fmt.Errorf("unshare: %w", err)
		}
		sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		defer unix.Close(sock)
		ifr, err := unix.NewIfreq("lo")
		if err != nil {
			return -1, err
		}
		if err := unix.IoctlIfreq(sock, unix.SIOCGIFFLAGS, ifr); err != nil {
			return -1, fmt.Errorf("loopback: %w", err)
		}
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
		if err := unix.IoctlIfreq(sock, unix.SIOCSIFFLAGS, ifr); err != nil {
			return -1, fmt.Errorf("loopback up: %w", err)
		}
		// The socket's namespace, by fd: no path lookup while the
		// main thread moves the root around.
		fd, err := unix.IoctlRetInt(sock, unix.SIOCGSKNS)
		if err != nil {
			return -1, fmt.Errorf("namespace of a socket (SIOCGSKNS): %w", err)
		}
		return fd, nil
	}()
	out <- netNS{fd: fd, err: err}
}

// lookPath finds the command inside the sandbox's root with the PATH of
// the command's own environment (not init's, which is empty).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, checkExec(name)
	}
	var firstErr error
	for _, dir := range lookpath.Dirs(env, lookpath.DefaultPath) {
		p := filepath.Join(dir, name)
		err := checkExec(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && !errors.Is(err, unix.ENOENT) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", unix.ENOENT
}

func checkExec(p string) error {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return unix.EISDIR
	}
	return unix.Access(p, unix.X_OK)
}

// sendProxyListener binds 127.0.0.1:port inside the sandbox's network
// namespace (a plain TCP socket: not MPTCP, which Go's net.Listen would
// pick) and sends it to the host, which serves it with the egress proxy;
// with it, in the same message, the TUN device tun (if not -1).
func sendProxyListener(chanFD, port, tun int) error {
	if tun >= 0 {
		defer unix.Close(tun)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fmt.Errorf("bind 127.0.0.1:%d: %w", port, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		return err
	}
	fds := []int{fd}
	if tun >= 0 {
		fds = append(fds, tun)
	}
	if err := unix.Sendmsg(chanFD, []byte{0}, unix.UnixRights(fds...), nil, 0); err != nil {
		return fmt.Errorf("send to host: %w", err)
	}
	return unix.Close(chanFD)
}

// denials counts the refused system calls the supervisor answered. In a
// session, a refusal is counted for the command whose process made it,
// where owner can name that command (by the process's ancestors and its
// session); one it cannot (a process that left its command's session, or
// whose command has ended) is shown to every command that ran while it
// was made.
type denials struct {
	mu sync.Mutex
	m  map[[2]int]int // the refusals no command was named for
	// by holds a session's refusals by the command they were made by,
	// until that command's report takes them (sinceFor).
	by map[uint64]map[[2]int]int
	// owner names the live command whose process pid (a thread's id, as
	// the notification gives it) is part of; 0 when none can be told. Nil
	// outside sessions. It is called without mu held.
	owner func(pid int) uint64
}

// setOwner sets d's owner, once, before or while the supervisor runs.
func (d *denials) setOwner(owner func(pid int) uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.owner = owner
}

// record is the supervisor's Record: process pid made system call nr,
// refused with errno.
func (d *denials) record(pid, nr, errno int) {
	d.mu.Lock()
	owner := d.owner
	d.mu.Unlock()
	var id uint64
	if owner != nil {
		id = owner(pid)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := [2]int{nr, errno}
	if id != 0 {
		if d.by == nil {
			d.by = map[uint64]map[[2]int]int{}
		}
		if d.by[id] == nil {
			d.by[id] = map[[2]int]int{}
		}
		d.by[id][k]++
		return
	}
	if d.m == nil {
		d.m = map[[2]int]int{}
	}
	d.m[k]++
}

func (d *denials) list() []denial { return d.since(nil) }

// snapshot copies the counts of refusals no command was named for so
// far, for since and sinceFor.
func (d *denials) snapshot() map[[2]int]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := make(map[[2]int]int, len(d.m))
	for k, n := range d.m {
		m[k] = n
	}
	return m
}

// since lists the refusals no command was named for that were counted
// after snap was taken.
func (d *denials) since(snap map[[2]int]int) []denial {
	return d.sinceFor(0, snap)
}

// sinceFor lists command id's own refusals (and forgets them: its report
// takes them once) with those no command was named for since snap.
func (d *denials) sinceFor(id uint64, snap map[[2]int]int) []denial {
	d.mu.Lock()
	defer d.mu.Unlock()
	sum := map[[2]int]int{}
	for k, n := range d.m {
		if n -= snap[k]; n > 0 {
			sum[k] += n
		}
	}
	if id != 0 {
		for k, n := range d.by[id] {
			sum[k] += n
		}
		delete(d.by, id)
	}
	out := make([]denial, 0, len(sum))
	for k, n := range sum {
		out = append(out, denial{Nr: k[0], Errno: k[1], Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Count > out[j].Count || (out[i].Count == out[j].Count && out[i].Nr < out[j].Nr)
	})
	return out
}

// initStageCalls are the system calls init's Go code and the Go runtime
// under it make after init installs its filters: to fork and exec the
// command (syscall.ForkExec), to wait, report and exit, and the runtime's
// own (memory, threads, signals, timers).
var initStageCalls = []int{
	unix.SYS_MMAP, unix.SYS_MUNMAP, unix.SYS_MADVISE, unix.SYS_FUTEX, unix.SYS_CLONE,
	unix.SYS_RT_SIGPROCMASK, unix.SYS_RT_SIGACTION, unix.SYS_RT_SIGRETURN, unix.SYS_SIGALTSTACK,
	unix.SYS_SCHED_YIELD, unix.SYS_NANOSLEEP, unix.SYS_GETPID, unix.SYS_GETTID, unix.SYS_TGKILL,
	unix.SYS_READ, unix.SYS_WRITE, unix.SYS_CLOSE, unix.SYS_FCNTL, unix.SYS_CLOSE_RANGE, unix.SYS_PIPE2,
	unix.SYS_SETSID, unix.SYS_IOCTL, unix.SYS_DUP3, unix.SYS_CHDIR, unix.SYS_EXECVE,
	unix.SYS_WAIT4, unix.SYS_KILL, unix.SYS_GETRUSAGE, unix.SYS_EXIT, unix.SYS_EXIT_GROUP,
}

// sessionCalls are the calls a session's init makes besides
// initStageCalls: to take requests and the command's fds, and to answer.
var sessionCalls = []int{unix.SYS_RECVMSG, unix.SYS_SENDMSG}

// initStageRefusals names the calls of initStageCalls (and sessionCalls,
// for a session's init) that prog refuses.
func initStageRefusals(prog []seccomp.Instruction, session bool) []string {
	calls := initStageCalls
	if session {
		calls = append(calls[:len(calls):len(calls)], sessionCalls...)
	}
	return initStageRefusalsOf(prog, calls)
}

// initStageRefusalsOf names the calls that prog refuses.
func initStageRefusalsOf(prog []seccomp.Instruction, calls []int) []string {
	arch := seccomp.NativeArch()
	var out []string
	for _, nr := range calls {
		ret, err := seccomp.Evaluate(prog, int32(nr), seccomp.AuditArch(arch), 0, [6]uint64{})
		if err != nil || !seccomp.Allows(ret) {
			name, _ := seccomp.Name(arch, nr)
			out = append(out, name)
		}
	}
	return out
}
