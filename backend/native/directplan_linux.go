package native

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/lookpath"
	"github.com/moatbox/moat/internal/rt0"
	"github.com/moatbox/moat/internal/seccomp"
)

// plan builds a direct start's steps from a Spec (see direct_linux.go).
// It makes the same decisions, in the same order, as the init stage's
// initMain and buildRoot; what those decide from the file system while
// they run (is a source a directory, is a path missing or a symbolic link)
// the steps decide in the child, through stat steps and conditions.
type plan struct {
	f      *forkState
	stages []stageInfo
	keep   []any // memory the steps point into
	list   *[]step
	group  uint16
	made   map[string]bool // directories made under the new root
	// scratch is the slot of the disk limit tmpfs's fd, 0 without a
	// limit; scratchDirs counts the directories made on it.
	scratch     uint16
	scratchDirs int
	// user is the sandbox user: who the command is, in its user
	// namespace. own is who init is, in its own (the same unless
	// planFDs.nest is set).
	user, own backend.Identity
	// mapped is memory of the plan outside Go's heap (see execArrays),
	// unmapped when the run ends.
	mapped [][]byte
	// strs is the chunk str packs C strings into (see str).
	strs []byte
}

// stageInfo names what a step does, for the host's error message. err,
// when set, replaces the errno's text (a pseudo step's own failure). gone,
// when set, is the path a mount that is not optional needs: its ENOENT is
// a backend.GoneError, as in the init stage.
type stageInfo struct{ name, err, gone string }

// planFDs are the inherited fds a plan uses.
type planFDs struct {
	mapR, mapW  int    // the go-ahead pipe
	ctl, status int    // control pipe (read end), status pipe (write end)
	stdio       [3]int // the command's stdin, stdout, stderr
	seccompChan int    // socket to send the observed filter's listener on, or -1
	proxyChan   int    // socket to send the proxy listener on (network mode proxy), or -1
	tunDir      int    // O_PATH fd of tunDir (Network.TUN), or -1
	trees       map[string]int
	// nest, when set, is init's identity in its own user namespace: the
	// id-mapped trees' owner, mapped to the sandbox user's host ids. Init
	// then starts the command in a namespace nested in it (see nestable).
	nest *backend.Identity
	// dropGroups: init drops its supplementary groups (moat is root).
	dropGroups bool
	// ctty: stdin is the pty the host made for the command (see
	// terminal), which becomes its controlling terminal.
	ctty bool
	// observed is the filter that gets the listener; execCheck says it
	// also sends each exec to the host (see execObserved).
	observed  int
	execCheck bool
	// listenCheck: it also sends each listen (see listenChecked).
	listenCheck bool
}

// directCalls are the system calls the direct start makes after its
// seccomp filters are installed: init's (sendmsg and close to hand over
// the listener, clone, ppoll, read, kill, wait4, getrusage, write, prctl
// and close_range before it waits for the host's end, exit_group) and the
// command's before execve (rt_sigprocmask, setsid). Their numbers come
// from golang.org/x/sys, for the architecture built: looking them up by
// name would build the table of every system call's name on each run.
var directCalls = []namedCall{
	{"sendmsg", unix.SYS_SENDMSG}, {"close", unix.SYS_CLOSE}, {"clone", unix.SYS_CLONE},
	{"ppoll", unix.SYS_PPOLL}, {"read", unix.SYS_READ}, {"kill", unix.SYS_KILL},
	{"wait4", unix.SYS_WAIT4}, {"getrusage", unix.SYS_GETRUSAGE}, {"write", unix.SYS_WRITE},
	{"prctl", unix.SYS_PRCTL}, {"close_range", unix.SYS_CLOSE_RANGE}, {"exit_group", unix.SYS_EXIT_GROUP},
	{"rt_sigprocmask", unix.SYS_RT_SIGPROCMASK}, {"setsid", unix.SYS_SETSID}, {"execve", unix.SYS_EXECVE},
}

// diskCalls are the calls init makes after its filters under a disk
// limit: fstatfs of the limit's tmpfs, to tell whether it was filled.
var diskCalls = []namedCall{{"fstatfs", unix.SYS_FSTATFS}}

// namedCall is a system call's number and, for messages, its name.
type namedCall struct {
	name string
	nr   int
}

// errNoDirect says why a Spec needs the init stage.
var errNoDirect = errors.New("needs the init stage")

// directSupported tells whether a Spec can be started directly. The init
// stage still serves what needs Go code inside the sandbox after the
// command: an overlay under a disk limit, whose writes go to the limit's
// tmpfs and are merged into the change set once the command has ended.
// It also takes a Spec whose seccomp filters would refuse the direct
// start's own calls.
func directSupported(spec *backend.Spec, filters [][]seccomp.Instruction, cmdFlags uintptr) error {
	if spec.Limits.DiskBytes > 0 {
		for _, m := range spec.Mounts {
			if m.Kind == backend.MountOverlay {
				return fmt.Errorf("overlay under a disk limit: %w", errNoDirect)
			}
		}
	}
	arch := seccomp.NativeArch()
	for i, prog := range filters {
		if i == 0 && spec.SeccompAtExec {
			continue // installed by the command just before its execve, see execFilter
		}
		if i == 0 {
			prog = seccomp.Observed(prog)
		}
		calls := directCalls
		if spec.Limits.DiskBytes > 0 {
			calls = append(calls[:len(calls):len(calls)], diskCalls...)
		}
		for _, c := range calls {
			var args [6]uint64
			if c.nr == unix.SYS_CLONE {
				args[0] = uint64(cmdFlags)
			}
			ret, err := seccomp.Evaluate(prog, int32(c.nr), seccomp.AuditArch(arch), 0, args)
			if err != nil || !seccomp.Allows(ret) {
				return fmt.Errorf("seccomp filter %d refuses %s: %w", i+1, c.name, errNoDirect)
			}
		}
	}
	return nil
}

func (p *plan) stage(name string) uint16 {
	p.stages = append(p.stages, stageInfo{name: name})
	return uint16(len(p.stages) - 1)
}

// val reserves a slot in vals for a step's result.
func (p *plan) val() uint16 {
	p.f.vals = append(p.f.vals, 0)
	return uint16(len(p.f.vals) - 1)
}

// str is s as a C string the plan keeps alive. A plan has some hundreds
// of them, which are packed into chunks rather than allocated one by one
// (most of a plan's allocations otherwise). A chunk is never grown:
// growing moves it, and the steps hold the addresses of the strings
// already in it; a string that does not fit starts a new chunk.
func (p *plan) str(s string) uintptr {
	const chunk = 4 << 10
	if cap(p.strs)-len(p.strs) < len(s)+1 {
		p.strs = make([]byte, 0, max(chunk, len(s)+1))
		p.keep = append(p.keep, p.strs)
	}
	at := len(p.strs)
	p.strs = append(append(p.strs, s...), 0)
	return uintptr(unsafe.Pointer(&p.strs[at]))
}

// mem keeps v alive and returns its address.
func mem[T any](p *plan, v *T) uintptr {
	p.keep = append(p.keep, v)
	return uintptr(unsafe.Pointer(v))
}

// call appends one system call step and returns its index.
func (p *plan) call(stage uint16, nr uintptr, args ...uintptr) int {
	s := step{nr: nr, kind: kindCall, stage: stage}
	copy(s.a[:], args)
	*p.list = append(*p.list, s)
	return len(*p.list) - 1
}

func (p *plan) at(i int) *step { return &(*p.list)[i] }

// newGroup starts a group of steps that a skip ends together.
func (p *plan) newGroup() uint16 {
	p.group++
	return p.group
}

const atFDCWD = ^uintptr(0) - 99 // AT_FDCWD, -100

// mkdirAll makes dir and its missing parents under the new root (only
// those the plan has not made already; existing ones are fine).
func (p *plan) mkdirAll(stage uint16, dir string, mode uint32, group uint16) {
	if dir == "/" || dir == newRoot || p.made[dir] {
		return
	}
	p.mkdirAll(stage, path.Dir(dir), 0o755, group)
	i := p.call(stage, unix.SYS_MKDIRAT, atFDCWD, p.str(dir), uintptr(mode))
	p.at(i).ok, p.at(i).group = uint16(unix.EEXIST), group
	// A directory made in a group that a skip may end is not counted as
	// made: a later step makes it again if it needs it.
	if group == 0 {
		p.made[dir] = true
	}
}

func (p *plan) mount(stage uint16, src, target, fstype string, flags uintptr, data string) int {
	var s, t, d uintptr
	if src != "" {
		s = p.str(src)
	}
	if fstype != "" {
		t = p.str(fstype)
	}
	if data != "" {
		d = p.str(data)
	}
	return p.call(stage, unix.SYS_MOUNT, s, p.str(target), t, flags, d)
}

func (p *plan) setAttr(stage uint16, target string, attr uint64, recursive bool) int {
	flags := uintptr(0)
	if recursive {
		flags = unix.AT_RECURSIVE
	}
	a := &unix.MountAttr{Attr_set: attr}
	return p.call(stage, unix.SYS_MOUNT_SETATTR, atFDCWD, p.str(target), flags, mem(p, a), unsafe.Sizeof(*a))
}

// stat adds a stat (or lstat, with AT_SYMLINK_NOFOLLOW) of path, or of the
// fd when path is empty, and a step that saves the file's mode; it returns
// the stat step and the mode's slot.
func (p *plan) stat(stage uint16, fd uintptr, name string, flags uintptr) (int, uint16) {
	st := new(unix.Stat_t)
	var np uintptr
	if name == "" {
		np, flags = p.str(""), flags|unix.AT_EMPTY_PATH
	} else {
		np = p.str(name)
	}
	i := p.call(stage, unix.SYS_NEWFSTATAT, fd, np, mem(p, st), flags)
	mode := p.val()
	*p.list = append(*p.list, step{kind: kindLoad32, p: unsafe.Pointer(&st.Mode), save: mode, stage: stage})
	return i, mode
}

// when sets the condition of steps from..to-1.
func (p *plan) when(from int, cond uint8, mode uint16, group uint16) {
	for i := from; i < len(*p.list); i++ {
		p.at(i).cond, p.at(i).condVal, p.at(i).group = cond, mode, group
	}
}

// setGroup puts steps from..end into group.
func (p *plan) setGroup(from int, group uint16) {
	for i := from; i < len(*p.list); i++ {
		p.at(i).group = group
	}
}

// mkTarget makes an empty directory or file to mount on, by the mode in
// the slot.
func (p *plan) mkTarget(stage uint16, target string, mode uint16, group uint16) {
	p.mkdirAll(stage, path.Dir(target), 0o755, group)
	from := len(*p.list)
	i := p.call(stage, unix.SYS_MKDIRAT, atFDCWD, p.str(target), 0o755)
	p.at(i).ok = uint16(unix.EEXIST)
	p.when(from, condDir, mode, group)
	from = len(*p.list)
	i = p.call(stage, unix.SYS_MKNODAT, atFDCWD, p.str(target), unix.S_IFREG|0o644, 0)
	p.at(i).ok = uint16(unix.EEXIST)
	p.when(from, condNotDir, mode, group)
}

// buildPlan turns spec into the steps of a direct start. filters are the
// compiled seccomp programs, the first of them observed.
//
// f is the child's state: with shareVM the child may already be running,
// waiting for the go-ahead before it reads any of what is built here.
func buildPlan(f *forkState, spec *backend.Spec, fds planFDs, filters [][]seccomp.Instruction, landlockABI int, rlimits []rlimitStep) (*plan, error) {
	// Sized for the default policy's plan (~340 setup steps, ~440 kept
	// values): growing the lists step by step allocated and copied
	// twice their size.
	p := &plan{f: f, made: map[string]bool{}, keep: make([]any, 0, 512), user: spec.User, own: spec.User}
	if fds.nest != nil {
		p.own = *fds.nest
	}
	f.setup = make([]step, 0, 384)
	f.resets = make([]step, 0, 64) // a step for each signal but SIGKILL and SIGSTOP
	f.vals = make([]uintptr, 1, 64)
	f.ctlFD, f.statusFD = fds.ctl, fds.status
	p.list = &f.setup
	p.stage("fork the command") // stageFork
	st := p.stage("start")

	// Every signal stays blocked in init, and none has a handler: the
	// child got a copy of the Go runtime's handlers, which must never run
	// in it (see forkDirect). PID 1 receives no signal it does not handle,
	// so blocking them changes nothing else; SIGCHLD is read from a
	// signalfd below. The command's process unblocks them all. A child
	// started with CLONE_CLEAR_SIGHAND skips the resets (f.resets).
	all := new(uint64)
	*all = ^uint64(0)
	p.call(st, unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, mem(p, all), 0, 8)
	p.list = &f.resets
	dfl := new([4]uint64) // struct sigaction with SIG_DFL
	for sig := uintptr(1); sig <= 64; sig++ {
		if sig == uintptr(unix.SIGKILL) || sig == uintptr(unix.SIGSTOP) {
			continue
		}
		p.call(st, unix.SYS_RT_SIGACTION, sig, mem(p, dfl), 0, 8)
	}
	p.list = &f.setup
	// Init has a process group of its own: the terminal's signals (Ctrl-C,
	// Ctrl-Z) go to moat, which forwards them.
	p.call(st, unix.SYS_SETPGID, 0, 0)

	// Only the fds this plan uses stay open: the child inherited every fd
	// of the host process (other runs' pipes, the host's terminal).
	dup := p.stage("set up standard input and output")
	for t, fd := range fds.stdio {
		if fd != t {
			p.call(dup, unix.SYS_DUP3, uintptr(fd), uintptr(t), 0)
		}
	}
	keep := []int{fds.ctl, fds.status, fds.mapR}
	for _, fd := range []int{fds.seccompChan, fds.proxyChan, fds.tunDir} {
		if fd >= 0 {
			keep = append(keep, fd)
		}
	}
	for _, fd := range fds.trees {
		keep = append(keep, fd)
	}
	for _, r := range closeRanges(keep) {
		p.call(p.stage("close inherited fds"), unix.SYS_CLOSE_RANGE, uintptr(r[0]), uintptr(r[1]), 0)
	}

	// Credentials: the sandbox user, with only the capabilities init
	// needs (in its user namespace only), as the init stage gets them.
	cred := p.stage("set credentials")
	if fds.dropGroups {
		p.call(cred, unix.SYS_SETGROUPS, 0, 0) // see writeIDMaps
	}
	p.call(cred, unix.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 1)
	gid, uid := uintptr(p.own.GID), uintptr(p.own.UID)
	p.call(cred, unix.SYS_SETRESGID, gid, gid, gid)
	p.call(cred, unix.SYS_SETRESUID, uid, uid, uid)
	caps := uint64(1) << unix.CAP_BLOCK_SUSPEND
	for _, c := range initCaps {
		caps |= 1 << c
	}
	if p.own != p.user && p.own.UID == 0 {
		// The nested namespace maps the sandbox user to uid 0 of this
		// one, which the kernel allows only to a creator that held
		// CAP_SETFCAP here (verify_root_map, against file capabilities
		// that would act as root's there). Dropped with the others.
		caps |= 1 << unix.CAP_SETFCAP
	}
	hdr := &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := &[2]unix.CapUserData{
		{Effective: uint32(caps), Permitted: uint32(caps)},
		{Effective: uint32(caps >> 32), Permitted: uint32(caps >> 32)},
	}
	p.call(cred, unix.SYS_CAPSET, mem(p, hdr), mem(p, data))

	// If moat dies, init dies, and with it the whole PID namespace. This
	// comes after the change of uid, which clears it. moat holds the
	// go-ahead pipe open until the run ends: if it died before the signal
	// was set, the pipe has hung up.
	p.call(st, unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL))
	pfd := &unix.PollFd{Fd: int32(fds.mapR), Events: unix.POLLIN}
	p.call(st, unix.SYS_PPOLL, mem(p, pfd), 1, mem(p, &unix.Timespec{}), 0, 0)
	rev := p.val()
	*p.list = append(*p.list, step{kind: kindLoad16, p: unsafe.Pointer(&pfd.Revents), save: rev, stage: st},
		step{kind: kindExpect, a: [6]uintptr{uintptr(rev), 0, uintptr(unix.ESRCH)},
			stage: p.stage2("start", "moat exited before the sandbox started")})
	p.call(st, unix.SYS_CLOSE, uintptr(fds.mapR))

	// The network namespace. Making one registers the kernel's
	// per-namespace state (sysctl tables, devices: about 0.4 ms here).
	// With shareVM a helper process does it while init builds the root:
	// it shares init's memory and fd table, unshares a network namespace,
	// brings loopback up and leaves an fd of the namespace (SIOCGSKNS on
	// its socket) in a slot; init joins it before it forks the command.
	// Without shareVM the clone that starts init makes it (see startDirect).
	var netFD, netPid, tunFD uint16
	netStage := "network namespace"
	if t := spec.Network.TUN; t != nil {
		// The helper reports an errno only: the stage names what it does.
		netStage = "network namespace and TUN device " + t.Name
	}
	if spec.Network.Mode != backend.NetHost {
		lo := p.stage(netStage)
		list := p.list
		if f.share {
			p.list = &f.net
			p.call(lo, unix.SYS_UNSHARE, unix.CLONE_NEWNET)
		}
		sock := p.val()
		i := p.call(lo, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		p.at(i).save = sock
		ifr, err := unix.NewIfreq("lo")
		if err != nil {
			return nil, err
		}
		ifr.SetUint16(unix.IFF_UP)
		i = p.call(lo, unix.SYS_IOCTL, uintptr(sock), unix.SIOCSIFFLAGS, mem(p, ifr))
		p.at(i).ref = 1
		if t := spec.Network.TUN; t != nil {
			if spec.Network.Mode != backend.NetProxy {
				return nil, errors.New("a TUN device needs network mode proxy")
			}
			if tunFD, err = p.tun(fds.tunDir, sock, t); err != nil {
				return nil, err
			}
		}
		if f.share {
			netFD = p.val()
			i = p.call(lo, unix.SYS_IOCTL, uintptr(sock), unix.SIOCGSKNS)
			p.at(i).ref, p.at(i).save = 1, netFD
		}
		i = p.call(lo, unix.SYS_CLOSE, uintptr(sock))
		p.at(i).ref = 1
		p.list = list
		if f.share {
			netPid = p.val()
			*p.list = append(*p.list, step{kind: kindSpawnNet, save: netPid, stage: lo})
		}
	}

	if err := p.root(spec, fds.trees); err != nil {
		return nil, err
	}
	for _, fd := range fds.trees {
		p.call(p.stage("close mount trees"), unix.SYS_CLOSE, uintptr(fd))
	}
	if netPid != 0 {
		// Join the helper's namespace: it has exited 0 once the fd is in
		// its slot; any other exit code is its failing step's errno.
		lo := p.stage(netStage)
		ws := new(int32)
		i := p.call(lo, unix.SYS_WAIT4, uintptr(netPid), mem(p, ws), unix.WALL, 0)
		p.at(i).ref = 1
		st := p.val()
		*p.list = append(*p.list, step{kind: kindLoad32, p: unsafe.Pointer(ws), save: st, stage: lo},
			step{kind: kindExitErrno, a: [6]uintptr{uintptr(st), 0, uintptr(unix.ENETDOWN)}, stage: lo})
		i = p.call(lo, unix.SYS_SETNS, uintptr(netFD), unix.CLONE_NEWNET)
		p.at(i).ref = 1
		i = p.call(lo, unix.SYS_CLOSE, uintptr(netFD))
		p.at(i).ref = 1
	}
	if spec.Hostname != "" {
		p.call(p.stage("sethostname"), unix.SYS_SETHOSTNAME, p.str(spec.Hostname), uintptr(len(spec.Hostname)))
	}
	if spec.Network.Mode == backend.NetProxy {
		p.proxyListener(spec.Network.ProxyPort, fds.proxyChan, tunFD)
	}
	// Nothing below needs a capability in init's user namespace. (The
	// owner may be the sandbox user itself, whom init's namespace then
	// maps as the command needs.)
	if p.own != p.user {
		p.enterCommandUserns()
	}

	for _, r := range rlimits {
		lim := &unix.Rlimit{Cur: r.cur, Max: r.max}
		p.call(p.stage("rlimit "+r.name), unix.SYS_PRLIMIT64, 0, uintptr(r.res), mem(p, lim), 0)
	}
	// The command inherits init's timer slack, which init has from the
	// thread of moat's that cloned it: set moat's own, not the one its
	// entry point raised for the start (see package rt0).
	if slack := rt0.Slack(); slack != 0 {
		p.call(p.stage("set timer slack"), unix.SYS_PRCTL, unix.PR_SET_TIMERSLACK, uintptr(slack))
	}

	// Init gives up its power: every capability (bounding set first) but
	// an inert one, then no_new_privs. Init cannot be made non-dumpable,
	// as the init stage is: the flag belongs to the address space, which
	// this child shares with moat (see forkDirect), and would hide moat's
	// own /proc files from it. What keeps the command out of init (and so
	// out of moat's memory) instead is that one capability left in init's
	// permitted set, CAP_BLOCK_SUSPEND: the kernel refuses any ptrace
	// access, and so /proc/1/mem, /proc/1/environ and the rest, to a
	// process whose capabilities are not a superset of the target's, and
	// hidepid=2 then hides /proc/1 altogether. CAP_BLOCK_SUSPEND is only
	// ever checked in the host's initial user namespace, where init has
	// no capability at all.
	// Every kernel moat runs on (5.12 on) knows the capabilities up to
	// CAP_LAST_CAP as x/sys has it (40, CAP_CHECKPOINT_RESTORE, 5.9): a
	// failure to drop one of them fails the start. Above it, a newer
	// kernel may know more; numbered without a gap, the first it does
	// not know (EINVAL) ends the drops (~20 calls fewer than all 64).
	drop := p.stage("drop capabilities")
	g := p.newGroup()
	for c := uintptr(0); c < 64; c++ {
		i := p.call(drop, unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c)
		if c > unix.CAP_LAST_CAP {
			p.at(i).skip, p.at(i).group = uint16(unix.EINVAL), g
		}
	}
	inert := uint64(1) << unix.CAP_BLOCK_SUSPEND
	p.call(drop, unix.SYS_CAPSET, mem(p, &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}),
		mem(p, &[2]unix.CapUserData{{Permitted: uint32(inert)}, {Permitted: uint32(inert >> 32)}}))
	p.call(p.stage("set no_new_privs"), unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1)
	if spec.Landlock {
		if err := p.landlock(spec, landlockABI); err != nil {
			return nil, err
		}
	}

	// SIGCHLD is read from a signalfd; the command unblocks it.
	sig := p.stage("signalfd")
	set := new(uint64)
	*set = 1 << (uint(unix.SIGCHLD) - 1)
	p.call(sig, unix.SYS_RT_SIGPROCMASK, unix.SIG_BLOCK, mem(p, set), 0, 8)
	sfd := p.val()
	i := p.call(sig, unix.SYS_SIGNALFD4, ^uintptr(0), uintptr(unsafe.Pointer(set)), 8, unix.SFD_CLOEXEC|unix.SFD_NONBLOCK)
	p.at(i).save = sfd
	f.sigFD = int(sfd)
	// Only fds 0-2 reach the command.
	p.call(p.stage("close inherited fds"), unix.SYS_CLOSE_RANGE, 3, ^uintptr(0)>>32, unix.CLOSE_RANGE_CLOEXEC)

	// Seccomp last: nothing above needs a call the filters refuse, and
	// directSupported checked that what comes after is allowed. The first
	// filter is observed: its listener goes to the host, which answers
	// each refused call (see seccomp.Observed) and so can report it. A
	// custom profile is not installed here but by the command (execFilter).
	// The command's own exec, decided before the run, goes through the
	// exec check unasked (see execArrays).
	var argv, envv uintptr
	var first *seccomp.FirstExec
	if fds.execCheck && !spec.CheckFirstExec {
		var err error
		if argv, envv, err = p.execArrays(spec.Args, spec.Env); err != nil {
			return nil, err
		}
		first = &seccomp.FirstExec{Argv: uint64(argv), Envp: uint64(envv)}
	}
	for k, prog := range filters {
		if k == 0 && spec.SeccompAtExec {
			continue
		}
		stg := p.stage(fmt.Sprintf("install seccomp filter %d", k+1))
		flags := uintptr(0)
		if k == fds.observed && fds.seccompChan >= 0 {
			prog = seccomp.Observed(prog)
			if fds.execCheck {
				prog = seccomp.WithExecNotify(prog, seccomp.NativeArch(), first)
			}
			if fds.listenCheck {
				prog = seccomp.WithListenNotify(prog, seccomp.NativeArch())
			}
			flags = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
		}
		fp := &unix.SockFprog{Len: uint16(len(prog)), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
		p.keep = append(p.keep, prog)
		i := p.call(stg, unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, mem(p, fp))
		if flags == 0 {
			continue
		}
		listener := p.val()
		p.at(i).save = listener
		// The listener goes to the host once the command has started
		// (f.post): the send wakes the host (~30 µs), which the command
		// need not wait for. A refused call the command makes before
		// then waits in the kernel until the host answers it. The
		// listener and the channel are close-on-exec: the command's
		// process, forked with a copy of init's fds, never has them.
		// With the exec check, the command's own execve waits for the
		// host's answer: the listener must be there before the fork.
		list := p.list
		if !fds.execCheck {
			p.list = &f.post
		}
		p.sendFD(p.stage("send the seccomp listener to the host"), fds.seccompChan, listener)
		p.list = list
	}

	// The command's steps: SIGCHLD unblocked, a session of its own (so
	// TIOCSTI cannot push keystrokes into the caller's shell) whose
	// controlling terminal, if any, is its own pty, then execve of each
	// PATH candidate in turn.
	p.list = &f.exec
	p.call(p.stage("drop capabilities"), unix.SYS_CAPSET, mem(p, &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}), mem(p, &[2]unix.CapUserData{}))
	p.call(p.stage("unblock signals"), unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, mem(p, new(uint64)), 0, 8)
	p.call(p.stage("setsid"), unix.SYS_SETSID)
	if fds.ctty {
		p.call(p.stage("set the controlling terminal"), unix.SYS_IOCTL, 0, unix.TIOCSCTTY, 0)
	}
	if spec.SeccompAtExec && len(filters) > 0 {
		p.execFilter(filters[0], fds)
	}
	if argv == 0 {
		argv, envv = p.strv(spec.Args), p.strv(spec.Env)
	}
	ex := p.stage("exec " + spec.Args[0])
	for _, c := range execCandidates(spec.Args[0], spec.Env) {
		p.call(ex, unix.SYS_EXECVE, p.str(c), argv, envv)
	}
	return p, nil
}

// enterCommandUserns moves init into a new user namespace, nested in its
// own, that maps the sandbox user to the ids init has in its own (the
// nested identity, see nestable): the command starts in it, as the sandbox
// user, with the same host ids as init. Init writes the maps itself, as a
// process may for its own ids, through the sandbox's /proc.
//
// /proc shows a process's files owned by host root, which init cannot
// open, unless its address space is dumpable; init's change of ids made
// it not, and so does any change of ids by another process sharing it
// (moat's concurrent runs' inits, a vfork child of moat's): init makes it
// dumpable again before each open, and opens again if it raced with such
// a change. It stays dumpable, as it is in an ordinary user's runs: what
// keeps the command out of init is the capability init keeps (see
// buildPlan), and the user namespace keeps every process outside of
// it but host root's (docs/security.md).
func (p *plan) enterCommandUserns() {
	stg := p.stage("enter the command's user namespace")
	p.call(stg, unix.SYS_UNSHARE, unix.CLONE_NEWUSER)
	for _, w := range [][2]string{
		{"/proc/self/uid_map", fmt.Sprintf("%d %d 1\n", p.user.UID, p.own.UID)},
		{"/proc/self/setgroups", "deny"},
		{"/proc/self/gid_map", fmt.Sprintf("%d %d 1\n", p.user.GID, p.own.GID)},
	} {
		again := p.call(stg, unix.SYS_PRCTL, unix.PR_SET_DUMPABLE, 1)
		fd := p.val()
		i := p.call(stg, unix.SYS_OPENAT, atFDCWD, p.str(w[0]), unix.O_WRONLY|unix.O_CLOEXEC, 0)
		p.at(i).save, p.at(i).ok = fd, uint16(unix.EACCES)
		*p.list = append(*p.list, step{kind: kindRetry, a: [6]uintptr{uintptr(again), uintptr(unix.EACCES), 1000, uintptr(p.val())}, stage: stg})
		b := []byte(w[1])
		p.keep = append(p.keep, b)
		i = p.call(stg, unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		p.at(i).ref = 1
		i = p.call(stg, unix.SYS_CLOSE, uintptr(fd))
		p.at(i).ref = 1
	}
}

// ownIDs rewrites the uid= and gid= options of a tmpfs, given for the
// sandbox user, to the ids init has in the namespace it mounts in: they
// differ with the nested identity.
func (p *plan) ownIDs(options string) string {
	if p.own == p.user || options == "" {
		return options
	}
	opts := strings.Split(options, ",")
	for i, o := range opts {
		switch o {
		case fmt.Sprintf("uid=%d", p.user.UID):
			opts[i] = fmt.Sprintf("uid=%d", p.own.UID)
		case fmt.Sprintf("gid=%d", p.user.GID):
			opts[i] = fmt.Sprintf("gid=%d", p.own.GID)
		}
	}
	return strings.Join(opts, ",")
}

func (p *plan) stage2(name, err string) uint16 {
	p.stages = append(p.stages, stageInfo{name: name, err: err})
	return uint16(len(p.stages) - 1)
}

// required makes the stat step i of a mount fail the run if the path is
// missing (a backend.GoneError), or, when optional, skip the
// mount's group: a missing path is decided in the child either way,
// without a step of its own.
func (p *plan) required(i int, optional bool, path string) {
	if optional {
		p.at(i).skip = uint16(unix.ENOENT)
		return
	}
	p.stages = append(p.stages, stageInfo{name: p.stages[p.at(i).stage].name, gone: path})
	p.at(i).stage = uint16(len(p.stages) - 1)
}

// proxyListener adds sendProxyListener's steps: a plain TCP socket (not
// MPTCP) bound to 127.0.0.1:port inside the sandbox's network namespace
// and listening, sent to the host, which serves it with the egress proxy;
// with it, in the same message, the TUN device in slot tun (if not 0).
func (p *plan) proxyListener(port, chanFD int, tun uint16) {
	stg := p.stage("proxy listener")
	sock := p.val()
	i := p.call(stg, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	p.at(i).save = sock
	one := new(int32)
	*one = 1
	i = p.call(stg, unix.SYS_SETSOCKOPT, uintptr(sock), unix.SOL_SOCKET, unix.SO_REUSEADDR, mem(p, one), 4)
	p.at(i).ref = 1
	sa := &unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte{127, 0, 0, 1}}
	pb := (*[2]byte)(unsafe.Pointer(&sa.Port)) // network byte order
	pb[0], pb[1] = byte(port>>8), byte(port)
	i = p.call(p.stage(fmt.Sprintf("proxy listener: bind 127.0.0.1:%d", port)), unix.SYS_BIND, uintptr(sock), mem(p, sa), unsafe.Sizeof(*sa))
	p.at(i).ref = 1
	i = p.call(stg, unix.SYS_LISTEN, uintptr(sock), 128)
	p.at(i).ref = 1
	slots := []uint16{sock}
	if tun != 0 {
		slots = append(slots, tun)
	}
	p.sendFD(p.stage("proxy listener: send to host"), chanFD, slots...)
}

// strv is a NULL-terminated array of C strings.
func (p *plan) strv(ss []string) uintptr {
	v := make([]uintptr, len(ss)+1)
	for i, s := range ss {
		v[i] = p.str(s)
	}
	p.keep = append(p.keep, v)
	return uintptr(unsafe.Pointer(&v[0]))
}

// sendFD sends the fds in slots over the socket chan in one message
// (SCM_RIGHTS), then closes them all.
func (p *plan) sendFD(stage uint16, chanFD int, slots ...uint16) {
	buf := []byte{0}
	oob := make([]byte, unix.CmsgSpace(4*len(slots)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SCM_RIGHTS
	h.SetLen(unix.CmsgLen(4 * len(slots)))
	iov := &unix.Iovec{Base: &buf[0]}
	iov.SetLen(1)
	msg := &unix.Msghdr{Iov: iov, Control: &oob[0]}
	msg.Iovlen = 1
	msg.SetControllen(len(oob))
	p.keep = append(p.keep, buf, oob, iov)
	for k, slot := range slots {
		*p.list = append(*p.list, step{kind: kindPoke32, p: unsafe.Pointer(&oob[unix.CmsgLen(4*k)]), a: [6]uintptr{1: uintptr(slot)}, stage: stage})
	}
	p.call(stage, unix.SYS_SENDMSG, uintptr(chanFD), mem(p, msg), 0)
	for _, slot := range slots {
		i := p.call(stage, unix.SYS_CLOSE, uintptr(slot))
		p.at(i).ref = 1
	}
	p.call(stage, unix.SYS_CLOSE, uintptr(chanFD))
}

// closeRanges are the ranges of fds from 3 up that are not in keep.
func closeRanges(keep []int) [][2]uint {
	var out [][2]uint
	lo := uint(3)
	sorted := slices.Clone(keep)
	slices.Sort(sorted)
	for _, k := range sorted {
		if k < int(lo) {
			continue
		}
		if uint(k) > lo {
			out = append(out, [2]uint{lo, uint(k) - 1})
		}
		lo = uint(k) + 1
	}
	return append(out, [2]uint{lo, ^uint(0) >> 32})
}

// execCandidates are the paths tried for the command, in order: name
// itself when it has a slash, else name in each directory of the
// command's PATH (the init stage's lookPath, without its checks: execve
// makes them).
func execCandidates(name string, env []string) []string {
	if strings.Contains(name, "/") {
		return []string{name}
	}
	var out []string
	for _, dir := range lookpath.Dirs(env, lookpath.DefaultPath) {
		out = append(out, filepath.Join(dir, name))
	}
	if len(out) == 0 {
		out = []string{name}
	}
	return out
}

// rlimitStep is one resource limit to set, computed on the host (the
// child inherits the host's limits, so the host sees the same hard ones).
type rlimitStep struct {
	name     string
	res      int
	cur, max uint64
}

// directRlimits are setRlimits' limits, computed on the host.
func directRlimits(l backend.Limits) ([]rlimitStep, error) {
	var out []rlimitStep
	add := func(name string, res int, v uint64) error {
		var cur unix.Rlimit
		if err := unix.Getrlimit(res, &cur); err != nil {
			return fmt.Errorf("rlimit %s: %w", name, err)
		}
		if v > cur.Max {
			v = cur.Max
		}
		r := rlimitStep{name: name, res: res, cur: v, max: v}
		if res == unix.RLIMIT_CPU && v < cur.Max {
			r.max = v + 1
		}
		out = append(out, r)
		return nil
	}
	if err := add("core", unix.RLIMIT_CORE, 0); err != nil {
		return nil, err
	}
	if l.CPUTime > 0 {
		if err := add("cpu", unix.RLIMIT_CPU, uint64((l.CPUTime+999_999_999)/1_000_000_000)); err != nil {
			return nil, err
		}
	}
	if l.OpenFiles > 0 {
		if err := add("open files", unix.RLIMIT_NOFILE, l.OpenFiles); err != nil {
			return nil, err
		}
	}
	if l.FileSize > 0 {
		if err := add("file size", unix.RLIMIT_FSIZE, l.FileSize); err != nil {
			return nil, err
		}
	}
	// Set by init, after the command's user namespace exists (see
	// setRlimits).
	if l.PidsRlimit && l.Pids > 0 {
		if err := add("processes", unix.RLIMIT_NPROC, uint64(l.Pids)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// root adds the steps of buildRoot: a private tmpfs becomes a temporary
// root with the host's root under it at /oldroot, the sandbox's root is
// assembled on a second tmpfs at /newroot from the Spec's ordered mounts,
// and a final pivot_root makes it the root with the old one detached.
func (p *plan) root(spec *backend.Spec, trees map[string]int) error {
	p.mount(p.stage("make mounts private"), "", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
	base := "/tmp"
	p.mount(p.stage("mount base tmpfs"), "tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, baseTmpfsOptions(spec))
	for _, d := range []string{base + oldRoot, base + newRoot} {
		p.call(p.stage("mkdir "+d), unix.SYS_MKDIRAT, atFDCWD, p.str(d), 0o755)
	}
	mk := p.stage("create mask file")
	fd := p.val()
	i := p.call(mk, unix.SYS_OPENAT, atFDCWD, p.str(base+maskFile), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0)
	p.at(i).save = fd
	i = p.call(mk, unix.SYS_CLOSE, uintptr(fd))
	p.at(i).ref = 1
	p.call(p.stage("pivot_root to base"), unix.SYS_PIVOT_ROOT, p.str(base), p.str(base+oldRoot))
	p.call(p.stage("chdir /"), unix.SYS_CHDIR, p.str("/"))
	mf := p.stage("mask file")
	p.mount(mf, maskFile, maskFile, "", unix.MS_BIND, "")
	p.setAttr(mf, maskFile, maskAttrs, false)
	p.mount(p.stage("mount root tmpfs"), "tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755")
	if size := spec.Limits.DiskBytes; size > 0 {
		// The disk limit (see disk_linux.go): one tmpfs of its size, on
		// the temporary root, of which /tmp, home and /dev/shm are
		// directories. Init keeps an fd of it to tell, once the command
		// has ended, whether it was filled (f.scratch).
		stg := p.stage("disk limit")
		p.call(stg, unix.SYS_MKDIRAT, atFDCWD, p.str(scratchDir), 0o755)
		p.mount(p.stage("disk limit: mount tmpfs"), "tmpfs", scratchDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,"+backend.TmpfsOptions(size))
		p.scratch = p.val()
		i := p.call(stg, unix.SYS_OPENAT, atFDCWD, p.str(scratchDir), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC)
		p.at(i).save = p.scratch
		p.f.scratch = int(p.scratch)
	}

	for i, m := range spec.Mounts {
		if err := p.applyMount(i, m, trees); err != nil {
			return err
		}
	}
	for _, t := range spec.MaskPaths {
		p.mask(newRoot+t, t, true)
	}
	for _, t := range spec.ReadOnlyPaths {
		stg := p.stage("read-only " + t)
		g := p.newGroup()
		target := newRoot + t
		from := len(*p.list)
		i, _ := p.stat(stg, atFDCWD, target, unix.AT_SYMLINK_NOFOLLOW)
		p.at(i).skip = uint16(unix.ENOENT)
		p.mount(stg, target, target, "", unix.MS_BIND|unix.MS_REC, "")
		p.setAttr(stg, target, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, true)
		p.setGroup(from, g)
	}

	p.call(p.stage("chdir new root"), unix.SYS_CHDIR, p.str(newRoot))
	p.call(p.stage("pivot_root"), unix.SYS_PIVOT_ROOT, p.str("."), p.str("."))
	p.call(p.stage("detach old root"), unix.SYS_UMOUNT2, p.str("."), unix.MNT_DETACH)
	p.call(p.stage("chdir /"), unix.SYS_CHDIR, p.str("/"))
	p.mount(p.stage("remount / read-only"), "", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
	dir := spec.Dir
	if dir == "" {
		dir = "/"
	}
	p.call(p.stage("chdir "+dir), unix.SYS_CHDIR, p.str(dir))
	return nil
}

func (p *plan) applyMount(i int, m backend.Mount, trees map[string]int) error {
	target := newRoot + m.Target
	switch m.Kind {
	case backend.MountBind:
		stg := p.stage("bind " + m.Source)
		g := p.newGroup()
		from := len(*p.list)
		fd, fromTree := trees[fmt.Sprint(i)]
		var si int
		var mode uint16
		if fromTree {
			si, mode = p.stat(stg, uintptr(fd), "", 0)
		} else {
			si, mode = p.stat(stg, atFDCWD, oldRoot+m.Source, 0)
		}
		p.required(si, m.Optional, m.Target)
		p.mkTarget(stg, target, mode, g)
		if fromTree {
			p.call(stg, unix.SYS_MOVE_MOUNT, uintptr(fd), p.str(""), atFDCWD, p.str(target), unix.MOVE_MOUNT_F_EMPTY_PATH)
		} else {
			p.mount(stg, oldRoot+m.Source, target, "", unix.MS_BIND|unix.MS_REC, "")
		}
		attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if m.ReadOnly {
			attr |= unix.MOUNT_ATTR_RDONLY
		}
		p.setAttr(stg+0, target, attr, true)
		p.setGroup(from, g)
	case backend.MountTmpfs:
		p.mkdirAll(p.stage("mkdir "+m.Target), target, 0o755, 0)
		if p.scratch != 0 {
			// Under a disk limit, a directory of the one sized tmpfs.
			p.bindScratch(p.stage("tmpfs "+m.Target), target, m.Options)
		} else {
			p.mount(p.stage("mount tmpfs "+m.Target), "tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, p.ownIDs(m.Options))
		}
		if m.ReadOnly {
			p.setAttr(p.stage("tmpfs "+m.Target), target, unix.MOUNT_ATTR_RDONLY, false)
		}
	case backend.MountSymlink:
		p.mkdirAll(p.stage("mkdir "+path.Dir(m.Target)), path.Dir(target), 0o755, 0)
		p.call(p.stage("symlink "+m.Target), unix.SYS_SYMLINKAT, p.str(m.Source), atFDCWD, p.str(target))
	case backend.MountMask:
		p.mask(target, m.Target, m.Optional)
	case backend.MountReadOnly, backend.MountPin:
		name, attr := "protect "+m.Target, uint64(unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
		if m.Kind == backend.MountPin {
			name, attr = "pin "+m.Target, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV
		}
		stg := p.stage(name)
		g := p.newGroup()
		from := len(*p.list)
		si, mode := p.stat(stg, atFDCWD, target, unix.AT_SYMLINK_NOFOLLOW)
		p.required(si, m.Optional, m.Target)
		// The Spec names resolved paths; a link here appeared since, and
		// following it would protect the wrong place.
		*p.list = append(*p.list, step{kind: kindFailMode, a: [6]uintptr{uintptr(mode), unix.S_IFLNK, uintptr(unix.ELOOP)},
			stage: p.stage2(name, "is a symbolic link (it changed while the sandbox was set up)")})
		p.mount(stg, target, target, "", unix.MS_BIND|unix.MS_REC, "")
		p.setAttr(stg, target, attr, m.Kind == backend.MountReadOnly)
		p.setGroup(from, g)
	case backend.MountProc:
		p.mkdirAll(p.stage("mkdir "+m.Target), target, 0o555, 0)
		p.mount(p.stage("mount proc"), "proc", target, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=2")
	case backend.MountDev:
		p.dev(target)
	case backend.MountOverlay:
		p.overlay(i, m, target, trees)
	case backend.MountFile:
		stg := p.stage("file " + m.Target)
		src := fmt.Sprintf("/file%d", i)
		fd := p.val()
		j := p.call(stg, unix.SYS_OPENAT, atFDCWD, p.str(src), unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
		p.at(j).save = fd
		if len(m.Data) > 0 {
			b := []byte(m.Data)
			p.keep = append(p.keep, b)
			j = p.call(stg, unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			p.at(j).ref = 1
		}
		j = p.call(stg, unix.SYS_CLOSE, uintptr(fd))
		p.at(j).ref = 1
		p.mkdirAll(stg, path.Dir(target), 0o755, 0)
		j = p.call(stg, unix.SYS_MKNODAT, atFDCWD, p.str(target), unix.S_IFREG|0o644, 0)
		p.at(j).ok = uint16(unix.EEXIST)
		p.mount(stg, src, target, "", unix.MS_BIND, "")
		p.setAttr(stg, target, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, false)
	default:
		return fmt.Errorf("mount %s: kind %q: %w", m.Target, m.Kind, errNoDirect)
	}
	return nil
}

// overlay adds overlayMount's steps (without a disk limit, which the
// direct start does not take): the layers are staged on the temporary
// root first (trees the host opened, or paths under the host's root);
// overlayfs keeps its own references to them, so they vanish from view
// with the temporary root while the overlay stays. In a user namespace
// overlayfs needs "userxattr".
func (p *plan) overlay(i int, m backend.Mount, target string, trees map[string]int) {
	stg := p.stage("overlay " + m.Target)
	lower, layers := oldRoot+m.Source, oldRoot+m.Layers
	stageTree := func(fd int, dir string) {
		p.mkdirAll(stg, dir, 0o700, 0)
		p.call(stg, unix.SYS_MOVE_MOUNT, uintptr(fd), p.str(""), atFDCWD, p.str(dir), unix.MOVE_MOUNT_F_EMPTY_PATH)
	}
	key := fmt.Sprint(i)
	if fd, ok := trees[key]; ok {
		lower = fmt.Sprintf("/stage/%d/lower", i)
		stageTree(fd, lower)
	}
	if fd, ok := trees[key+"/layers"]; ok {
		layers = fmt.Sprintf("/stage/%d/layers", i)
		stageTree(fd, layers)
	}
	p.mkdirAll(stg, target, 0o755, 0)
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s/upper,workdir=%s/work,userxattr", lower, layers, layers)
	p.mount(stg, "overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts)
}

// bindScratch binds a fresh directory of the disk limit's tmpfs at target
// (an existing directory), with the mode a tmpfs mount's options ask for,
// as scratch.bind does in the init stage.
func (p *plan) bindScratch(stage uint16, target, options string) {
	p.scratchDirs++
	d := fmt.Sprintf("%s/d%d", scratchDir, p.scratchDirs)
	p.call(stage, unix.SYS_MKDIRAT, atFDCWD, p.str(d), 0o700)
	// mkdir applies the umask and cannot set the sticky bit.
	mode := scratchMode(options)
	p.call(stage, unix.SYS_FCHMODAT, atFDCWD, p.str(d), uintptr(uint32(mode&os.ModePerm)|stickyBits(mode)))
	p.mount(stage, d, target, "", unix.MS_BIND, "")
}

// mask hides target: a directory becomes an empty read-only tmpfs, any
// other file the mode-0 mask file; a missing one is left alone if
// optional, and fails the run otherwise.
func (p *plan) mask(target, name string, optional bool) {
	stg := p.stage("mask " + name)
	g := p.newGroup()
	from := len(*p.list)
	si, mode := p.stat(stg, atFDCWD, target, unix.AT_SYMLINK_NOFOLLOW)
	p.required(si, optional, name)
	d := len(*p.list)
	p.mount(stg, "tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0000,size=4k")
	p.when(d, condDir, mode, g)
	d = len(*p.list)
	p.mount(stg, maskFile, target, "", unix.MS_BIND, "")
	p.when(d, condNotDir, mode, g)
	p.setGroup(from, g)
}

// dev adds buildDev's steps: a minimal /dev with the harmless devices
// bound from the host's.
func (p *plan) dev(target string) {
	p.mkdirAll(p.stage("mkdir /dev"), target, 0o755, 0)
	p.mount(p.stage("mount /dev"), "tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k")
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		stg := p.stage("dev " + d)
		t := target + "/" + d
		p.call(stg, unix.SYS_MKNODAT, atFDCWD, p.str(t), unix.S_IFREG|0o644, 0)
		p.mount(stg, oldRoot+"/dev/"+d, t, "", unix.MS_BIND, "")
	}
	p.call(p.stage("dev pts"), unix.SYS_MKDIRAT, atFDCWD, p.str(target+"/pts"), 0o755)
	p.mount(p.stage("mount devpts"), "devpts", target+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
	p.call(p.stage("dev shm"), unix.SYS_MKDIRAT, atFDCWD, p.str(target+"/shm"), 0o755)
	if p.scratch != 0 {
		p.bindScratch(p.stage("dev shm"), target+"/shm", "mode=1777")
	} else {
		p.mount(p.stage("mount /dev/shm"), "tmpfs", target+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
	}
	links := [][2]string{
		{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
		{"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
	}
	for _, l := range links {
		p.call(p.stage("dev "+l[1]), unix.SYS_SYMLINKAT, p.str(l[0]), atFDCWD, p.str(target+"/"+l[1]))
	}
	p.setAttr(p.stage("dev"), target, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, false)
	for _, d := range []string{target, target + "/pts", target + "/shm"} {
		p.made[d] = true
	}
}

// execFilter adds the steps that install a custom profile in the command's
// process, the last thing before its execve, as runc does: the profile is
// written for the command, and init, which runs on after it, must never be
// held to it. Under the filter the command makes only execve (and, when
// every execve fails, the write of that failure and exit_group), which
// sandbox.seccompProfiles checked the profile allows.
//
// The filter is observed when the host can answer for it: the command's
// process shares init's fd table (CLONE_FILES) until its execve gives it a
// copy of its own, so the listener the kernel makes lands in init's table,
// at the lowest free fd, which init finds out beforehand; init sends it to
// the host once the command has started, as it does its own filter's. A
// refused call would wait until then for its answer, so a profile that
// refuses what the command may still call after installing it (a failed
// execve's write to the status pipe) is installed without a listener, and
// its refusals are then not reported.
func (p *plan) execFilter(prog []seccomp.Instruction, fds planFDs) {
	stg := p.stage("install seccomp filter 1")
	flags := uintptr(0)
	if fds.seccompChan >= 0 && !fds.execCheck && !fds.listenCheck && observable(seccomp.Observed(prog), fds.status) {
		prog = seccomp.Observed(prog)
		flags = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
		list := p.list
		// Init, just before it forks the command: the lowest free fd.
		p.list = &p.f.setup
		slot := p.val()
		i := p.call(stg, unix.SYS_FCNTL, 0, unix.F_DUPFD_CLOEXEC, 0)
		p.at(i).save = slot
		i = p.call(stg, unix.SYS_CLOSE, uintptr(slot))
		p.at(i).ref = 1
		p.f.cmdFlags |= unix.CLONE_FILES | unix.CLONE_VFORK
		p.list = &p.f.post
		p.sendFD(p.stage("send the seccomp listener to the host"), fds.seccompChan, slot)
		p.list = list
	}
	fp := &unix.SockFprog{Len: uint16(len(prog)), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
	p.keep = append(p.keep, prog)
	p.call(stg, unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, mem(p, fp))
}

// observable tells whether the command can run under the observed program
// obs from its install to its execve without a refusal nobody would answer
// yet: execve itself, and the failure path's write to the status pipe and
// exit_group.
func observable(obs []seccomp.Instruction, status int) bool {
	audit := seccomp.AuditArch(seccomp.NativeArch())
	for _, c := range []struct {
		nr   int
		args [6]uint64
	}{
		{unix.SYS_EXECVE, [6]uint64{}},
		{unix.SYS_WRITE, [6]uint64{uint64(status), 0, uint64(unsafe.Sizeof(record{}))}},
		{unix.SYS_EXIT_GROUP, [6]uint64{126}},
		{unix.SYS_EXIT_GROUP, [6]uint64{127}},
	} {
		ret, err := seccomp.Evaluate(obs, int32(c.nr), audit, 0, c.args)
		if err != nil || !seccomp.Allows(ret) {
			return false
		}
	}
	return true
}
