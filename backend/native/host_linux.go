package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
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
	"github.com/moatbox/moat/internal/rt0"
	"github.com/moatbox/moat/internal/seccomp"
	"github.com/moatbox/moat/internal/termsafe"
)

// Backend is the native Linux backend. The zero value is ready to use.
type Backend struct {
	// Exe is the binary re-executed as the sandbox's init; it must link
	// this package (whose init function runs the stage). Empty means the
	// running binary.
	Exe string
	// InitStage starts every run through the init stage, even one the
	// direct start could serve (see direct_linux.go): for tests that
	// cover both, and for comparison.
	InitStage bool
	// ExitAfter says that the caller exits as soon as Run returns (the
	// CLI does). The direct start's init, whose processes are all dead by
	// then, is left to end with the caller: its exit takes the teardown
	// of the memory it shares with the caller, and of its namespaces, off
	// the caller's own exit (~0.2 ms). A caller that goes on would keep
	// that idle init until it exits; it leaves this false, and init ends
	// before Run returns.
	ExitAfter bool
	// NoLockedExits promises that no goroutine of this process ends while
	// locked to its OS thread (runtime.LockOSThread without a matching
	// UnlockOSThread), which makes the runtime end the thread: inits may
	// then be started from any thread (the CLI). Left false, they are
	// started from one thread kept for that, made at the first run (two
	// OS threads, once): the kernel kills init, and with it the run, when
	// the thread that started it ends (see onStartThread).
	NoLockedExits bool
	// OneAtATime promises that this process never runs two sandboxes at
	// once (the CLI). A run without cgroup limits then stays in the
	// caller's cgroup. Left false, on a host whose limits are on cgroup v2
	// and where this process is alone in its cgroup, each such run gets a
	// cgroup of its own without controllers (cgroup.NewBare, a mkdir and
	// an rmdir), so that a run with limits started meanwhile finds the
	// caller's cgroup holding the caller alone, as cgroup v2 needs to
	// enable controllers for it.
	OneAtATime bool
	// ForkStart starts the direct start's init with a plain fork, as on
	// architectures without the clone trampoline (arm64), instead of in
	// moat's address space: for tests, which run that path on amd64 too.
	ForkStart bool
}

// lingering holds the control pipes of the inits left to end with this
// process (Backend.ExitAfter): unreachable, an os.File would be closed
// by its finalizer.
var lingering struct {
	sync.Mutex
	files []*os.File
}

// Name implements backend.Backend.
func (*Backend) Name() string { return "native" }

// Capabilities implements backend.Backend: cgroup limits are available
// when this caller can create cgroups with the controller; a process
// limit is available without one where RLIMIT_NPROC is counted per user
// namespace.
func (*Backend) Capabilities() backend.Capabilities {
	info := cgroup.Probe()
	c := backend.Capabilities{
		Memory: info.Usable["memory"], MemoryWhy: info.Why["memory"],
		Pids: info.Usable["pids"], PidsWhy: info.Why["pids"],
		CPU: info.Usable["cpu"], CPUWhy: info.Why["cpu"],
		LandlockABI: UsableLandlockABI(), Delegation: info.HowTo,
	}
	switch {
	case c.Pids:
		c.PidsBy = backend.PidsCgroup
	case NprocPerUserns():
		c.Pids, c.PidsBy, c.PidsWhy = true, backend.PidsRlimit, ""
	default:
		c.PidsWhy += "; and RLIMIT_NPROC, which would do without a cgroup, is counted per user namespace only from Linux 5.14"
	}
	return c
}

// NprocPerUserns reports whether the kernel counts RLIMIT_NPROC per user
// namespace and uid (Linux 5.14 and later), so that it bounds one
// sandbox's tasks rather than every process of the caller's uid.
func NprocPerUserns() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 5 || major == 5 && minor >= 14
}

// cloneFlags are the namespaces init starts in. The network namespace is
// not among them: creating one in the clone held up the whole start by
// about 0.5 ms, so init makes it itself (see newNetNS), on a thread of its
// own, while it reads the Spec and builds the root.
const cloneFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// initArgs is init's command line: with argNetNS when the run gets a
// network namespace, so that init starts making it before it has even read
// the Spec.
func initArgs(n backend.Network) []string {
	if n.Mode == backend.NetHost {
		return []string{initArg0}
	}
	return []string{initArg0, argNetNS}
}

// initCaps are the capabilities init holds, within its own user namespace
// only, while it builds the root. It drops all of them before the command
// starts.
var initCaps = []uintptr{
	unix.CAP_SYS_ADMIN,  // mount, pivot_root, sethostname
	unix.CAP_NET_ADMIN,  // bring up loopback
	unix.CAP_SETPCAP,    // empty the bounding set
	unix.CAP_SYS_CHROOT, // pivot_root
	// overlayfs checks the mounter's access to its layers at mount time
	// and records the mounter's credentials for copy-up; within this user
	// namespace only the caller's (or, as root, the sandbox's) files are
	// affected.
	unix.CAP_DAC_OVERRIDE,
}

// run is the host side of one sandbox.
type run struct {
	spec    *backend.Spec
	stdio   backend.Stdio
	start   time.Time
	started time.Time // the "started" message arrived
	// ended: init ended (or, lingering, reported), before the output was
	// drained: a reader slow to take the rest is not the command's time.
	ended   time.Time
	crash   chan string // the init stage's first line of runtime output (fdCrash)
	cg      *cgroup.Cgroup
	signal  func(syscall.Signal) // signals init, never after it was reaped
	wait    func()               // waits for init to end, then sets state
	state   *syscall.WaitStatus  // how init ended
	stages  []stageInfo          // a direct start's stages, for its errors
	cleanup []func()             // run when Run returns
	stopSup *os.File             // closing it stops a direct start's supervisor
	supDone chan struct{}
	// initSupervised: the host answers the init stage's notifications
	// (see superviseInit).
	initSupervised bool
	onSetsid       setsidNoticer // a session's supervisor tells it of each setsid (see attribute)
	setsidOnly     bool          // a session whose supervisor hears of setsid but checks no exec
	exitAfter      bool          // Backend.ExitAfter
	onInitParent   func(func())  // Backend.onInitParent
	forkStart      bool          // Backend.ForkStart
	plan           *plan         // a direct start's plan, which its child reads
	nest           []idmap       // trees a direct start maps with init's user namespace (nestable)
	afterWait      []func()      // run once init has been reaped
	seen           denials       // a direct start's refused system calls
	killed         atomic.Value  // backend.Cause the host killed the run for
	lost           atomic.Value  // the path of the protection that went (CauseProtection)
	output         atomic.Int64
	tty            *terminal // the command's pty, when the caller's stdin is a terminal

	// control is the spec pipe, kept open after the Spec: signals to
	// forward to the command, and for a run with changes to save (save),
	// the request to stop it.
	control  *os.File
	save     bool
	netChan  *os.File // host end of the proxy listener channel
	tun      bool     // a TUN device comes with the proxy listener
	netChild *os.File // init's end, closed here once init has it
	// sessChild is init's end of a session's request socket (see
	// session_init_linux.go), closed here once init has it.
	sessChild *os.File
	pid       int // the init stage's host pid
	mu        sync.Mutex
	listener  net.Listener
	closed    bool
}

// pipe makes a pipe between the host and init, returned as its read and
// write ends. The end the host reads (hostReads) goes through Go's poller;
// the others stay blocking, as init needs its ends. (os.Pipe puts both
// ends in non-blocking mode and registers them with the poller, and Fd
// then sets init's ends back to blocking: ten system calls more per run.)
func pipe(hostReads bool) (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	if hostReads {
		if err := unix.SetNonblock(p[0], true); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return nil, nil, os.NewSyscallError("fcntl", err)
		}
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

// Run implements backend.Backend.
func (b *Backend) Run(ctx context.Context, spec *backend.Spec, stdio backend.Stdio) (*backend.ExitStatus, error) {
	// A kernel older than 5.12, or a seccomp filter around moat, would
	// fail init half-way with a bare errno: say what is missing first.
	if missing := hostinfo.Missing(); len(missing) > 0 {
		return nil, fmt.Errorf("this kernel (Linux %s) does not offer %s, which every sandbox needs: %s: %w",
			hostinfo.Kernel(), strings.Join(missing, " or "), hostinfo.NeedKernel, errors.ErrUnsupported)
	}
	r := &run{spec: spec, stdio: stdio, start: time.Now(), exitAfter: b.ExitAfter, forkStart: b.ForkStart, onInitParent: b.onInitParent}
	if f, ok := stdio.Stdin.(*os.File); ok && f != nil && !pipefd.Passable(f, r.spec.User.HostUID) {
		switch {
		case pipefd.Anonymous(f):
			// A pipe the command could reopen to write into (see
			// internal/pipefd): relayed through one of moat's, which
			// takes from it only what the command reads, as holding it
			// would, so the caller's shell or loop reads on after moat
			// (pipefd.LazyPipe). The run's end takes what was read.
			pr, finish, err := pipefd.LazyPipe(f)
			if err != nil {
				return nil, fmt.Errorf("stdin pipe: %w", err)
			}
			defer pr.Close()
			defer finish()
			r.stdio.Stdin = pr
		default:
			// Its contents, not the file (see internal/pipefd). A
			// terminal is replaced by a pty below.
			r.stdio.Stdin = contentsOf(f)
		}
	}
	exe := b.Exe
	if exe == "" {
		exe = "/proc/self/exe"
	}
	var cleanup []func()
	defer func() {
		cleanup = append(cleanup, r.cleanup...)
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()

	// A cgroup is made only for the limits that need one. Joining a v1
	// cgroup costs milliseconds (the kernel waits for an RCU grace period
	// on migration), and the PID namespace already guarantees that the
	// whole run can be killed; without a cgroup, CPU time and peak memory
	// come from the rusage of what init reaped. Only where concurrent runs
	// need it (see OneAtATime) does a run without limits get a cgroup v2
	// directory without controllers, which costs no migration.
	cg, err := runCgroup(spec, b.OneAtATime, 0)
	if err != nil {
		return nil, err
	}
	if cg != nil {
		r.cg = cg
		cleanup = append(cleanup, func() { cg.Destroy() })
	}

	msgs := make(chan message, 4)
	specR, specW, err := pipe(false)
	if err != nil {
		return nil, fmt.Errorf("spec pipe: %w", err)
	}
	linger := false // see Backend.ExitAfter
	cleanup = append(cleanup, func() {
		specR.Close()
		if !linger {
			specW.Close()
			return
		}
		lingering.Lock()
		lingering.files = append(lingering.files, specW)
		lingering.Unlock()
	})
	statR, statW, err := pipe(true)
	if err != nil {
		return nil, fmt.Errorf("status pipe: %w", err)
	}
	cleanup = append(cleanup, func() { statR.Close(); statW.Close() })
	outR, outW, err := pipe(true)
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	cleanup = append(cleanup, func() { outR.Close(); outW.Close() })
	// One writer for both outputs: one pipe, whose order is the order
	// written (see backend.Stdio).
	one := stdio.OneOutput()
	errR, errW := outR, outW
	if !one {
		if errR, errW, err = pipe(true); err != nil {
			return nil, fmt.Errorf("stderr pipe: %w", err)
		}
		cleanup = append(cleanup, func() { errR.Close(); errW.Close() })
	}
	tty, background, err := openTerminal(stdio)
	if err != nil {
		return nil, err
	}
	if background {
		r.stdio.Stdin = nil // /dev/null
	}
	if tty != nil {
		r.tty = tty
		cleanup = append(cleanup, tty.close)
		// The pty stands in for the caller's terminals; a stream it
		// replaces has its pipe closed, whose copy then ends at once.
		r.stdio.Stdin = tty.slave
		if tty.outSlave {
			outW.Close()
			outW = tty.slave
		}
		if tty.errSlave && !one {
			errW.Close()
			errW = tty.slave
		}
		if one {
			errW = outW // the pty too when it stands in for Stdout
		}
	}

	// The seccomp profiles are compiled here, for either start.
	var filters [][]seccomp.Instruction
	for _, prof := range spec.Seccomp {
		prog, err := seccomp.Compile(prof, seccomp.NativeArch())
		if err != nil {
			return nil, fmt.Errorf("compile seccomp profile: %w", err)
		}
		filters = append(filters, prog)
	}
	var trees map[string]*os.File
	idmapped := make(chan error, 1)
	idmapped <- nil
	direct := !b.InitStage && directSupported(spec, filters, commandFlags(r.shareVM())) == nil
	if r.stdio.CheckExec != nil {
		var err error
		if filters, err = execFilters(spec, filters, direct); err != nil {
			return nil, err
		}
	}
	if os.Geteuid() != 0 {
		if err := ownersUnchecked(spec); err != nil {
			return nil, err
		}
	} else {
		// openTrees may leave mounts out: of a copy, not the caller's.
		own := *spec
		spec, r.spec = &own, &own
		t, maps, err := openTrees(spec)
		if err != nil {
			return nil, err
		}
		trees = t
		cleanup = append(cleanup, func() {
			for _, f := range t {
				f.Close()
			}
		})
		if direct && nestable(maps) {
			r.nest = maps // mapped with init's own user namespace, see nestable
		} else if len(maps) > 0 {
			// Id-mapping a tree needs a user namespace, made by a child
			// process: that goes on on another thread while this one
			// prepares the start. Init moves the trees into place only
			// after the host has waited for it.
			<-idmapped
			go func() { idmapped <- applyIDMaps(spec, maps, r.onInitParent) }()
			cleanup = append(cleanup, func() { idmapped <- <-idmapped }) // never leave it running
		}
	}
	if direct {
		if err := r.startDirect(filters, trees, idmapped, specR, statW, outW, errW); err != nil {
			return nil, err
		}
		r.control = specW
		cleanup = append(cleanup, r.stopSupervisor)
		go readRecords(statR, msgs, r.stages, spec.Limits.DiskBytes)
	} else {
		if err := r.startInit(exe, filters, trees, idmapped, specR, specW, statW, outW, errW); err != nil {
			return nil, err
		}
		go readMessages(statR, msgs)
	}

	if r.netChan != nil {
		go r.receiveListener()
		defer r.closeListener()
	}

	var copies sync.WaitGroup
	var ttyErr error
	// Output to a person's terminal is filtered (see backend.Stdio).
	var term termsafe.Set
	copies.Add(1)
	go r.copyOut(&copies, outR, term.Wrap(stdio.Stdout))
	if !one {
		copies.Add(1)
		go r.copyOut(&copies, errR, term.Wrap(stdio.Stderr))
	}
	if tty != nil {
		// Only the command holds the pty now: its output ends when the
		// last process of the run has closed it.
		tty.slave.Close()
		if stdio.OnTerminal != nil {
			stdio.OnTerminal()
		}
		if ttyErr = tty.start(); ttyErr != nil {
			r.kill(backend.CauseKilled)
		}
		copies.Add(1)
		go r.copyOut(&copies, tty.master, term.Wrap(tty.out))
	}

	done := make(chan struct{})
	go r.watch(ctx, done)

	var exitMsg, errMsg *message
	var stopWatch func()
	defer func() {
		if stopWatch != nil {
			stopWatch()
		}
	}()
	for m := range msgs {
		switch m.Type {
		case "started":
			r.started = time.Now()
			// Every mount is in place once the command has started.
			var err error
			if stopWatch, err = r.watchMounts(); err != nil {
				errMsg = &message{Type: "error", Stage: "watch the protections", Err: err.Error()}
				r.kill(backend.CauseKilled)
			}
		case "exit":
			exitMsg = &m
		case "error":
			errMsg = &m
		}
	}
	if linger = direct && exitMsg != nil && r.cg == nil && r.exitAfter; linger {
		// The direct start's init killed and reaped every other process
		// of the run before it reported, and closed its other fds (see
		// serve): all that is left is its own exit, in which the kernel
		// tears its namespaces down, once the control pipe is closed.
		// With ExitAfter that is at this process's exit (the pipe stays
		// open): init is reaped in the background until then.
		go r.wait()
	} else {
		if direct {
			// Init waits for this after its report (see serve). A
			// library caller's Run returns only once init has ended: a
			// next run must not find it, exiting, in the cgroup it
			// shares with this process (cgroup v2 then refuses to
			// enable controllers for a child of that cgroup).
			r.control.Close()
		}
		r.wait() // the outcome is in the messages and the process state
	}
	r.ended = time.Now()
	close(done)
	copies.Wait()
	dropped := backend.TerminalDenials(term.Close())
	if r.control != nil && !linger {
		r.control.Close()
	}
	if ttyErr != nil {
		return nil, ttyErr
	}
	if exitMsg != nil && exitMsg.MergeErr != "" {
		return nil, &backend.InitError{Stage: "save overlay changes", Err: errors.New(exitMsg.MergeErr)}
	}

	if errMsg != nil {
		return nil, initError(errMsg)
	}
	if r.crash != nil && exitMsg == nil {
		if text := <-r.crash; text != "" {
			return nil, &backend.InitError{Stage: "init", Err: fmt.Errorf("moat's init died: %s", text)}
		}
	}
	st := r.status(exitMsg)
	if direct || r.initSupervised {
		// The host answered the notifications: what it refused is known
		// however the run ended, a limit's kill included (the command
		// could otherwise hide its refusals by outliving --wall).
		st.Denials = r.explain(r.seen.list())
	}
	st.Denials = append(st.Denials, dropped...)
	if path, ok := r.lost.Load().(string); ok {
		st.Denials = append(st.Denials, backend.ProtectionLost(path))
	}
	return st, nil
}

// setsidNoticer is a seccomp.Supervisor's Setsid.
type setsidNoticer = func(pid int) (after func())

// runCgroup makes the cgroup of a run or session, or returns nil when it
// needs none. spare is added to its processes limit: a session's init
// counts there too, with threads of its own, and until it is ready it
// may hold up to initSpareTasks of them besides the commands' share
// (as setRlimits gives it where RLIMIT_NPROC is the limit); its host
// lowers the limit to what init holds then (spareInitTasks). Without
// the spare a low limit ended init before it served (the Go runtime
// cannot make a thread).
func runCgroup(spec *backend.Spec, oneAtATime bool, spare int64) (*cgroup.Cgroup, error) {
	lim := spec.Limits
	cgPids := lim.Pids
	if lim.PidsRlimit {
		cgPids = 0 // init sets RLIMIT_NPROC instead
	}
	if cgPids > 0 {
		cgPids += spare
	}
	if lim.MemoryBytes > 0 || cgPids > 0 || lim.CPUs > 0 {
		// Cgroups a SIGKILLed moat could not remove are swept first (only
		// empty ones: the PID namespace took their processes with it).
		cgroup.Sweep("moat-")
		cg, err := cgroup.New("moat-"+spec.RunID, cgroup.Limits{MemoryBytes: lim.MemoryBytes, Pids: cgPids, CPUs: lim.CPUs})
		if err != nil {
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
		return cg, nil
	}
	if oneAtATime {
		return nil, nil
	}
	cg, err := cgroup.NewBare("moat-" + spec.RunID)
	if err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	if cg != nil {
		cgroup.Sweep("moat-") // young ones, this run's among them, are left
	}
	return cg, nil
}

// startInit starts the run through the init stage: the moat binary
// re-executed as the sandbox's PID 1, which reads the Spec from the pipe.
func (r *run) startInit(exe string, filters [][]seccomp.Instruction, trees map[string]*os.File, idmapped chan error, specR, specW, statW, outW, errW *os.File) error {
	spec, stdio := r.spec, r.stdio
	// Init gets the compiled programs, not the profiles: decoding those
	// would cost it more than the rest of the Spec.
	initCopy := *spec
	initCopy.Seccomp = nil
	is := initSpec{Spec: &initCopy, TimerSlack: rt0.Slack(), Terminal: r.tty != nil}
	// With changes to save (an overlay workspace under a disk limit), a
	// limit stops the command through init rather than killing init.
	for _, m := range spec.Mounts {
		if m.Kind == backend.MountOverlay && spec.Limits.DiskBytes > 0 {
			is.Control = true
		}
	}
	crashR, crashW, err := pipe(true)
	if err != nil {
		return fmt.Errorf("crash pipe: %w", err)
	}
	r.cleanup = append(r.cleanup, func() { crashR.Close(); crashW.Close() })
	extra := []*os.File{specR, statW, crashW} // fds 3, 4, 5: fdSpec, fdStatus, fdCrash
	if trees != nil {
		is.Trees = map[string]int{}
		for key, f := range trees {
			is.Trees[key] = 3 + len(extra) // ExtraFiles[k] is fd 3+k
			extra = append(extra, f)
		}
	}

	if r.sessChild != nil {
		is.SessionFD = 3 + len(extra)
		extra = append(extra, r.sessChild)
	}
	var execChild *os.File
	if listenChecked(spec) && len(filters) == 0 {
		return errNoListenCheck
	}
	if stdio.CheckExec != nil || r.setsidOnly || listenChecked(spec) {
		child, err := r.superviseInit(filters[0])
		if err != nil {
			return err
		}
		is.ExecFD, is.SetsidOnly = 3+len(extra), r.setsidOnly
		is.Listen = listenChecked(spec)
		is.ListenOnly = stdio.CheckExec == nil && !r.setsidOnly
		extra = append(extra, child)
		execChild = child
	}
	if spec.Network.Mode == backend.NetProxy {
		if stdio.ServeProxy == nil {
			return errors.New("network mode proxy needs a proxy to serve it (Stdio.ServeProxy)")
		}
		if spec.Network.TUN != nil && stdio.ServeTUN == nil {
			return errors.New("a TUN device needs a network stack to serve it (Stdio.ServeTUN)")
		}
		host, child, err := socketPair()
		if err != nil {
			return fmt.Errorf("proxy channel: %w", err)
		}
		r.cleanup = append(r.cleanup, func() { host.Close(); child.Close() })
		is.NetFD = 3 + len(extra)
		extra = append(extra, child)
		r.netChan, r.netChild = host, child
		r.tun = spec.Network.TUN != nil
	}

	root := os.Geteuid() == 0
	cmd := &exec.Cmd{
		Path:       exe,
		Args:       initArgs(spec.Network),
		Env:        []string{},
		Stdin:      stdio.Stdin,
		Stdout:     outW,
		Stderr:     errW,
		ExtraFiles: extra,
		WaitDelay:  time.Second,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: cloneFlags,
			UidMappings: []syscall.SysProcIDMap{
				{ContainerID: spec.User.UID, HostID: spec.User.HostUID, Size: 1},
			},
			GidMappings: []syscall.SysProcIDMap{
				{ContainerID: spec.User.GID, HostID: spec.User.HostGID, Size: 1},
			},
			// As root, init drops the supplementary groups moat has
			// (see writeIDMaps); an ordinary caller's stay.
			GidMappingsEnableSetgroups: root,
			Credential:                 &syscall.Credential{Uid: uint32(spec.User.UID), Gid: uint32(spec.User.GID), NoSetGroups: !root},
			AmbientCaps:                initCaps,
			// If moat itself dies, init dies, and with it the whole PID
			// namespace: nothing outlives the host side.
			Pdeathsig: syscall.SIGKILL,
			// Init has a process group of its own: the terminal's signals
			// (Ctrl-C, Ctrl-Z) go to moat, which forwards them.
			Setpgid: true,
		},
	}
	if fd, ok := r.cgFD(); ok {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = fd
	}
	r.wait = func() {
		cmd.Wait()
		if cmd.ProcessState == nil {
			return
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			r.state = &ws
		}
	}

	// Pdeathsig is tied to the thread that forks (see onStartThread).
	r.onInitParent(func() { err = cmd.Start() })
	if err != nil {
		return startError(err)
	}
	r.signal = func(s syscall.Signal) { cmd.Process.Signal(s) }
	r.pid = cmd.Process.Pid
	// From here on the run is killed and reaped on every path.
	specR.Close()
	statW.Close()
	crashW.Close()
	r.crash = make(chan string, 1)
	go readCrash(crashR, r.crash)
	outW.Close()
	errW.Close()
	if r.sessChild != nil {
		r.sessChild.Close()
	}
	if r.netChild != nil {
		// Only init holds it now: if init dies before sending the
		// listener, the receiver sees end of file.
		r.netChild.Close()
	}
	if execChild != nil {
		execChild.Close() // the same, for the exec-checking listener
	}

	if r.cg != nil && !cmd.SysProcAttr.UseCgroupFD {
		if err := r.cg.Add(cmd.Process.Pid); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	// The trees are id-mapped (see Run) while init's runtime starts up.
	err = <-idmapped
	idmapped <- nil
	if err != nil {
		specW.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return err
	}
	for _, prog := range filters {
		is.Filters = append(is.Filters, encodeFilter(prog))
	}
	_, err = specW.Write(encodeInitSpec(&is))
	if err == nil {
		r.control, r.save = specW, is.Control
	} else {
		specW.Close()
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("send spec to init: %w", err)
	}

	return nil
}

// startError explains why init could not be started. What fails there is
// creating the namespaces, most often the user namespace, which a sysctl,
// Ubuntu's AppArmor restriction or a container's seccomp profile can
// refuse (EPERM, EACCES), or user.max_user_namespaces can exhaust (ENOSPC,
// EUSERS).
func startError(err error) error {
	var why string
	switch {
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		why = "the kernel refused to create the sandbox's user namespace"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EUSERS):
		why = "no more user namespaces may be created (user.max_user_namespaces)"
	default:
		return fmt.Errorf("start sandbox init: %w", err)
	}
	detail := "unprivileged user namespaces may be disabled (kernel.unprivileged_userns_clone, Ubuntu's AppArmor restriction, a container's seccomp profile); moat doctor checks what it can"
	if os.Geteuid() == 0 {
		detail = "user.max_user_namespaces may be 0, or, inside a container, its seccomp profile or missing capabilities refuse it; moat doctor checks what it can"
	}
	if us := hostinfo.UserNamespaces(); !us.Usable {
		detail = us.Detail
	}
	return fmt.Errorf("start sandbox init: %s: %s: %w", why, detail, err)
}

func (r *run) cgFD() (int, bool) {
	if r.cg == nil {
		return 0, false
	}
	return r.cg.UnifiedFD()
}

// watch enforces the wall clock and cancellation by killing init, which
// takes the whole PID namespace with it.
func (r *run) watch(ctx context.Context, done chan struct{}) {
	var timer <-chan time.Time
	if w := r.spec.Limits.Wall; w > 0 {
		t := time.NewTimer(w - time.Since(r.start))
		defer t.Stop()
		timer = t.C
	}
	for {
		select {
		case s := <-r.stdio.Signals:
			switch s := s.(type) {
			case syscall.Signal:
				if s > 0 && s < 256 {
					// Init forwards it to the command's process group
					// (a write of two bytes is atomic on a pipe).
					r.control.Write([]byte{ctlSignal, byte(s)})
				}
			case backend.Barrier:
				close(s)
			}
			continue
		case <-done:
		case <-timer:
			r.kill(backend.CauseTimeout)
		case <-ctx.Done():
			r.kill(backend.CauseKilled)
		}
		return
	}
}

// kill ends the run for cause; the first cause wins. When init has
// changes to save, it is asked to stop the command and given a while to
// save them before it is killed too.
func (r *run) kill(cause backend.Cause) {
	if !r.killed.CompareAndSwap(nil, cause) {
		return
	}
	if r.save {
		if _, err := r.control.Write([]byte{ctlStop}); err == nil {
			time.AfterFunc(saveGrace, func() { r.signal(syscall.SIGKILL) })
			return
		}
	}
	if r.cg == nil && r.control != nil {
		// Without a cgroup, CPU time and peak memory come only from init's
		// report, which a killed init never sends: init is asked to kill
		// the command instead, and then reaps and reports the whole run as
		// when the command ends. It is killed itself if it has not ended
		// by a short while, as when the command left its process group.
		if _, err := r.control.Write([]byte{ctlSignal, byte(syscall.SIGKILL)}); err == nil {
			time.AfterFunc(killGrace, func() { r.signal(syscall.SIGKILL) })
			return
		}
	}
	r.signal(syscall.SIGKILL)
	if r.cg != nil {
		r.cg.Kill()
	}
}

// killGrace is how long init may take to reap and report a run whose
// command it was asked to kill.
const killGrace = 250 * time.Millisecond

// saveGrace is how long init may take to save a run's changes after a
// limit stopped the command.
const saveGrace = 30 * time.Second

// copyOut copies one output stream, counting both streams together
// against the output limit; past it, the run is killed.
func (r *run) copyOut(wg *sync.WaitGroup, src io.Reader, dst io.Writer) {
	defer wg.Done()
	if dst == nil {
		dst = io.Discard
	}
	limit := r.spec.Limits.OutputBytes
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			total := r.output.Add(int64(n))
			if limit > 0 && total > limit {
				// Write what fits, then stop the run.
				over := total - limit
				if keep := int64(n) - over; keep > 0 {
					dst.Write(buf[:keep])
				}
				r.kill(backend.CauseOutput)
				io.Copy(io.Discard, src)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				// Nobody reads the output any more (a closed pipe, a
				// failing writer): close our end, so the command's next
				// write fails (EPIPE, SIGPIPE) as it would outside.
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

func readMessages(r io.Reader, out chan<- message) {
	defer close(out)
	for {
		b, err := readFrame(r)
		if err != nil {
			return
		}
		if m, err := decodeMessage(b); err == nil {
			out <- m
		}
	}
}

func initError(m *message) error {
	var err error = errors.New(m.Err)
	if m.Gone != "" {
		err = &backend.GoneError{Path: m.Gone}
	} else if m.Errno != 0 {
		// Keep init's message (it names the path) and the errno to test.
		err = &errnoError{msg: m.Err, errno: syscall.Errno(m.Errno)}
	}
	if len(m.Stage) > 5 && m.Stage[:5] == "exec " {
		switch syscall.Errno(m.Errno) {
		case syscall.ENOENT:
			err = fmt.Errorf("%w: %v", backend.ErrNotFound, err)
		case syscall.EACCES, syscall.ENOEXEC, syscall.EISDIR, syscall.EPERM:
			err = fmt.Errorf("%w: %v", backend.ErrNotExecutable, err)
		}
	}
	return &backend.InitError{Stage: m.Stage, Err: err, Errno: m.Errno}
}

// status turns what was seen into an ExitStatus with the cause.
func (r *run) status(exit *message) *backend.ExitStatus {
	end := r.ended
	if end.IsZero() {
		end = time.Now()
	}
	st := &backend.ExitStatus{ExitCode: -1, Wall: end.Sub(r.start), OutputBytes: backend.Delivered(r.output.Load(), r.spec.Limits.OutputBytes)}
	if !r.started.IsZero() {
		st.Setup = r.started.Sub(r.start)
	}
	if r.spec.Landlock {
		st.LandlockABI = UsableLandlockABI()
	}
	var cgs cgroup.Stats
	haveCg := false
	if r.cg != nil {
		if s, err := r.cg.Stats(); err == nil {
			cgs, haveCg = s, true
		}
	}
	if exit != nil {
		ws := syscall.WaitStatus(exit.WaitStatus)
		if ws.Signaled() {
			st.Signal = int(ws.Signal())
		} else {
			st.ExitCode = ws.ExitStatus()
		}
		st.CPU = time.Duration(exit.UserNanos + exit.SysNanos)
		st.MaxMemory = exit.MaxRSSKiB * 1024
		st.Denials = r.explain(exit.Denials)
	} else if ws := r.state; ws != nil {
		// init died without reporting: killed by the host or the kernel.
		st.Signal = int(syscall.SIGKILL)
		if ws.Signaled() {
			st.Signal = int(ws.Signal())
		}
	}
	if haveCg {
		if cgs.CPUUsageNanos > 0 {
			st.CPU = time.Duration(cgs.CPUUsageNanos)
		}
		if cgs.MemoryPeak > 0 {
			st.MaxMemory = cgs.MemoryPeak
		}
	}

	hit := func(c backend.Cause) { st.LimitsHit = append(st.LimitsHit, c) }
	if haveCg && cgs.OOMKills > 0 {
		hit(backend.CauseMemory)
	}
	if haveCg && cgs.PidsLimitHits > 0 {
		hit(backend.CausePids)
	}
	cpuHit := r.spec.Limits.CPUHit(syscall.Signal(st.Signal), st.CPU)
	if cpuHit {
		hit(backend.CauseCPU)
	}
	fileHit := r.spec.Limits.FileSizeHit(syscall.Signal(st.Signal))
	if fileHit {
		hit(backend.CauseFile)
	}
	diskFull := exit != nil && exit.DiskFull
	if diskFull {
		hit(backend.CauseDisk)
	}
	killed, _ := r.killed.Load().(backend.Cause)
	if killed != "" && killed != backend.CauseKilled && killed != backend.CauseProtection { // a kill is no limit
		hit(killed)
	}

	switch {
	case killed != "":
		st.Cause = killed
	case haveCg && cgs.OOMKills > 0 && st.Signal == int(syscall.SIGKILL):
		st.Cause = backend.CauseMemory
	case cpuHit:
		st.Cause = backend.CauseCPU
	case fileHit:
		st.Cause = backend.CauseFile
	case diskFull && (st.Signal != 0 || st.ExitCode != 0):
		st.Cause = backend.CauseDisk
	case haveCg && cgs.PidsLimitHits > 0 && (st.Signal != 0 || st.ExitCode != 0):
		st.Cause = backend.CausePids
	case haveCg && cgs.OOMKills > 0 && st.ExitCode != 0:
		st.Cause = backend.CauseMemory
	case st.Signal != 0:
		st.Cause = backend.CauseSignal
	default:
		st.Cause = backend.CauseExit
	}
	return st
}

func socketPair() (host, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "net-host"), os.NewFile(uintptr(fds[1]), "net-init"), nil
}

// receiveListener takes the proxy listener init bound inside the sandbox's
// network namespace and hands it to the proxy. A socket belongs to the
// namespace it was created in, so the host can accept on it from outside:
// each connection reaches the proxy directly, with no forwarder between.
func (r *run) receiveListener() {
	n := 1
	if r.tun {
		n = 2
	}
	fds, ok := receiveFDs(r.netChan, n)
	if !ok {
		return
	}
	if r.tun {
		go r.stdio.ServeTUN(os.NewFile(uintptr(fds[1]), "tun"))
	}
	f := os.NewFile(uintptr(fds[0]), "proxy-listener")
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		l.Close()
		return
	}
	r.listener = l
	r.mu.Unlock()
	r.stdio.ServeProxy(l)
}

func (r *run) closeListener() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.listener != nil {
		r.listener.Close()
	}
}

// errnoError is a failure reported by init: its message, and the errno
// for errors.Is.
type errnoError struct {
	msg   string
	errno syscall.Errno
}

func (e *errnoError) Error() string { return e.msg }
func (e *errnoError) Unwrap() error { return e.errno }

// explain names the refused system calls and the rules that refused them.
func (r *run) explain(ds []denial) []backend.Denial {
	if len(ds) == 0 || len(r.spec.Seccomp) == 0 {
		return nil
	}
	prof := r.spec.Seccomp[0]
	arch := seccomp.NativeArch()
	out := make([]backend.Denial, 0, len(ds))
	for _, d := range ds {
		name, ok := seccomp.Name(arch, d.Nr)
		if !ok {
			name = fmt.Sprintf("syscall %d", d.Nr)
		}
		errName := unix.ErrnoName(syscall.Errno(d.Errno))
		if errName == "" {
			errName = fmt.Sprintf("errno %d", d.Errno)
		}
		rule := seccomp.RuleFor(prof, name, d.Errno)
		if rule == "" && name == "listen" && d.Errno == int(unix.EACCES) && listenChecked(r.spec) {
			rule = "a TCP socket listened on without a bind would get an ephemeral port, which network.tcp_bind does not allow"
		}
		out = append(out, backend.Denial{Layer: "seccomp", What: name, Errno: errName, Count: d.Count, Rule: rule})
	}
	return out
}

// readCrash reads what init's Go runtime printed on its stderr (fdCrash)
// until init has ended, and sends its first line: the cause ("fatal
// error: ..."). The rest, a dump of goroutines, is for moat's developers
// and is dropped, never shown to the command or to the user.
func readCrash(rd io.Reader, out chan<- string) {
	// Nothing is held while init runs: the buffer is made once it prints.
	var first [1]byte
	n, _ := rd.Read(first[:])
	buf := make([]byte, 4096)
	if n > 0 {
		buf[0] = first[0]
		k, _ := io.ReadFull(rd, buf[1:])
		n += k
	}
	io.Copy(io.Discard, rd)
	out <- crashHeadline(string(buf[:n]))
}

// crashHeadline is the line of a Go runtime's crash output that says
// what happened (a panic, a fatal error, a signal), with the signal's
// line after it if there is one; else the first line. The runtime may
// print a traceback's complaint first ("runtime: g 1: unexpected return
// pc ...").
func crashHeadline(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	head := lines[0]
	for _, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") || strings.HasPrefix(l, "SIG") && strings.Contains(l, ": ") {
			head = l
			break
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "[signal ") && l != head {
			return head + " " + l
		}
	}
	return head
}
