package seccomp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/internal/pollwait"
)

// InstallObserved installs Observed(prog) like Install, with a listener,
// and returns the listener fd (close-on-exec) for Supervise. At most one
// filter of a process can have a listener.
func InstallObserved(prog []Instruction) (int, error) {
	return installListener(Observed(prog), "observed")
}

// Notify says which calls an observed filter sends to its supervisor
// besides those it refuses.
type Notify struct {
	Exec   bool // WithExecNotify
	Setsid bool // WithSetsidNotify
	Listen bool // WithListenNotify
}

// InstallObservedNotify is InstallObserved for a filter that also sends
// the calls n names to the supervisor.
func InstallObservedNotify(prog []Instruction, n Notify) (int, error) {
	prog = Observed(prog)
	arch := NativeArch()
	if n.Exec {
		prog = WithExecNotify(prog, arch, nil)
	}
	if n.Setsid {
		prog = WithSetsidNotify(prog, arch)
	}
	if n.Listen {
		prog = WithListenNotify(prog, arch)
	}
	return installListener(prog, "notifying")
}

func installListener(prog []Instruction, what string) (int, error) {
	if err := checkInstall(prog); err != nil {
		return -1, err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	flags := unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH | unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, uintptr(flags), uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return -1, fmt.Errorf("seccomp: install %s filter: %w", what, errno)
	}
	return int(fd), nil
}

// seccompNotif and seccompNotifResp are struct seccomp_notif and
// struct seccomp_notif_resp.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// Supervise answers the notifications of a filter installed with
// InstallObserved until fd is closed or no process uses the filter any
// more: each refused call gets the errno prog (the original program)
// gives it, and is passed to record. It blocks; run it in a goroutine.
func Supervise(fd int, prog []Instruction, record func(pid, nr, errno int)) {
	SuperviseUntil(fd, -1, prog, record)
}

// SuperviseUntil is Supervise for a process that outlives the filter's
// users (the host of a sandbox): it also returns once no process uses the
// filter, or once stop (a pipe's read end; -1 for none) is readable or
// closed at the other end.
func SuperviseUntil(fd, stop int, prog []Instruction, record func(pid, nr, errno int)) {
	(&Supervisor{Prog: prog, Record: record}).Serve(fd, stop)
}

// ExecCall is a program about to start in a supervised process: what its
// execve or execveat was given, read from the caller's memory.
type ExecCall struct {
	// Pid is the caller's process id, as the supervisor sees it.
	Pid int
	// Path is the program's path as given, relative to Dirfd (the
	// caller's fd, or AT_FDCWD for its working directory); "" for an
	// fexecve.
	Path  string
	Dirfd int
	// Argv are its arguments. Truncated says there were more (or longer
	// ones) than a supervisor reads: Argv is then a prefix.
	Argv      []string
	Truncated bool
	// Preload are the words of the environment the program is given that
	// load code into it (IsPreload: LD_PRELOAD=…, LD_LIBRARY_PATH=…). The
	// new image is killed if its environment's are not these.
	Preload []string
	// Files, which the supervisor makes before it asks Exec, is for Exec
	// to note in the file the call runs as Exec decided it: the program,
	// or the interpreter its #! lines lead to (Files.Note). The image the
	// kernel starts must be one of them (continueChecked): a path swapped
	// between the check and the kernel's own open of it would run a file
	// nobody decided.
	Files *Files
}

// Files are the files, by device and inode, that an exec may run as it
// was decided. Exec notes them before it answers, and the supervisor reads
// them once the call has gone on: never both at once.
type Files struct {
	ids    [][2]uint64
	elf    bool
	interp bool // the program read was no ELF file (Interpreted)
}

// Note adds the file open at fd (a descriptor of this process, O_PATH
// too), an ELF file the kernel runs itself or not (a file it runs through
// a binfmt_misc interpreter).
//
// It reports whether the file was noted: one that cannot be told (its
// fstat failed) is not, and its caller must not let the exec go on.
func (fs *Files) Note(fd int, elf bool) bool {
	var st unix.Stat_t
	if fs == nil || unix.Fstat(fd, &st) != nil {
		return false
	}
	fs.ids = append(fs.ids, [2]uint64{st.Dev, st.Ino})
	fs.elf = fs.elf || elf
	return true
}

// Interpreted notes that the program the check read is no ELF file: a
// #! script, or a file for binfmt_misc, which the kernel runs through an
// interpreter with the program's name among its arguments.
func (fs *Files) Interpreted() {
	if fs != nil {
		fs.interp = true
	}
}

// interpreted says whether Interpreted was noted, with a file.
func (fs *Files) interpreted() bool {
	return fs != nil && len(fs.ids) > 0 && fs.interp
}

// admits says whether the image process pid has just started (stopped at
// PTRACE_EVENT_EXEC) runs one of the files noted, when any were. A file
// that is no ELF and no #! script runs through a binfmt_misc interpreter
// the check never opened: when no ELF was noted, the image may run one of
// the interpreters registered there.
func (fs *Files) admits(pid int) bool {
	if fs == nil || len(fs.ids) == 0 {
		return true // an Exec that pins no file decides by the argv alone
	}
	var st unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(pid)+"/exe", &st) != nil {
		return false
	}
	id := [2]uint64{st.Dev, st.Ino}
	if slices.Contains(fs.ids, id) {
		return true
	}
	return !fs.elf && slices.Contains(binfmtInterpreters(), id)
}

// binfmtInterpreters are the files of the host's enabled binfmt_misc
// entries' interpreters.
func binfmtInterpreters() [][2]uint64 {
	const dir = "/proc/sys/fs/binfmt_misc"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var ids [][2]uint64
	for _, e := range ents {
		if e.Name() == "register" || e.Name() == "status" {
			continue
		}
		b, err := os.ReadFile(dir + "/" + e.Name())
		if err != nil || !bytes.HasPrefix(b, []byte("enabled\n")) {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(line, "interpreter "); ok {
				var st unix.Stat_t
				if unix.Stat(p, &st) == nil {
					ids = append(ids, [2]uint64{st.Dev, st.Ino})
				}
			}
		}
	}
	return ids
}

// Supervisor answers the notifications of an observed filter.
type Supervisor struct {
	// Prog is the original program, whose errno the supervisor gives each
	// refused call.
	Prog []Instruction
	// Record, if set, is told of each refused call: the calling thread's
	// id (as the supervisor sees it), the call and its errno.
	Record func(pid, nr, errno int)
	// Exec, if set, is asked about each execve and execveat that Prog
	// allows (the filter must notify them: see WithExecNotify), on the
	// supervisor's goroutine, which answers nothing else meanwhile, so it
	// must not block: errno 0 lets the call go on, anything else is the
	// errno it fails with. A call let go on is followed into the image it
	// starts, which is killed before it runs if its argv is not the one
	// Exec was asked about (continueChecked). An answer that
	// must wait (for a person) is a non-nil later instead: the supervisor
	// calls it on a goroutine of its own, with a ctx that ends when the
	// supervisor stops, and answers the call with the errno it returns.
	// A call whose arguments cannot be read fails with EACCES without
	// asking.
	//
	// Most execs are answered at once: a goroutine per exec costs a
	// wake-up of another thread on every exec (docs/performance.md).
	Exec func(c ExecCall) (errno int, later func(ctx context.Context) int)
	// Setsid, if set, is told the pid of each process about to call a
	// setsid that Prog allows (the filter must notify them: see
	// WithSetsidNotify), before the call goes on. Without it such a call
	// goes on untold. What it returns, if not nil, is called once the
	// call has been let go on and before the next notification is read:
	// work that need not hold the caller up.
	Setsid func(pid int) (after func())
}

// Serve answers notifications on the listener fd until no process uses
// the filter any more, or stop (a pipe's read end; -1 for none) is
// readable or closed at the other end; then it waits for the Exec calls
// under way, whose ctx it has ended. A receive blocked in the kernel
// would wait for ever after the last user is gone, so with a stop it
// waits for the listener to be readable first (listenerWait): it is only
// once a notification has been queued, and then a receive returns at once
// (ENOENT if its caller has died since).
func (s *Supervisor) Serve(fd, stop int) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	arch := NativeArch()
	var lw *listenerWait
	if stop >= 0 {
		lw = newListenerWait(fd, stop)
		defer lw.close()
	}
	for {
		if lw != nil && !lw.wait() {
			return
		}
		var req seccompNotif
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&req))); errno != 0 {
			if errno == unix.EINTR || errno == unix.ENOENT || errno == unix.EAGAIN {
				// ENOENT: the caller died before its call was read. Stopping
				// here would leave every later refused call waiting for an
				// answer that never comes.
				continue
			}
			return // the listener is gone
		}
		errNo := eperm
		ret, err := Evaluate(s.Prog, req.nr, req.arch, req.ip, req.args)
		if err == nil && Allows(ret) && s.Exec != nil && IsExec(arch, int(req.nr)) {
			if c, later := s.answerExec(fd, &req); later != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// The decision may wait for a person: it ends with
					// its caller, whose call then answers nobody (a
					// command killed while its ask waited).
					callCtx, done := whileCallerWaits(ctx, fd, req.id)
					errno := later(callCtx)
					done()
					if errno != 0 {
						respond(fd, req.id, errno)
					} else {
						continueChecked(fd, &req, c)
					}
				}()
			}
			continue
		}
		if err == nil && Allows(ret) && IsSetsid(arch, int(req.nr)) {
			var after func()
			if s.Setsid != nil {
				after = s.Setsid(int(req.pid))
			}
			respond(fd, req.id, 0)
			if after != nil {
				after()
			}
			continue
		}
		if err == nil && Allows(ret) && IsListen(arch, int(req.nr)) {
			// Sent by WithListenNotify: made here, on the caller's socket.
			if errno := answerListen(fd, &req); errno == int(unix.EACCES) && s.Record != nil {
				s.Record(int(req.pid), int(req.nr), errno)
			}
			continue
		}
		if e, ok := ErrnoOf(ret); err == nil && ok {
			errNo = e
		}
		// Recorded before answering: once answered, the command may exit
		// and init report at once.
		if s.Record != nil {
			s.Record(int(req.pid), int(req.nr), errNo)
		}
		respond(fd, req.id, errNo)
	}
}

// respond answers notification id: errno 0 lets the call go on
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE), anything else fails it.
func respond(fd int, id uint64, errno int) {
	resp := seccompNotifResp{id: id, error: -int32(errno)}
	if errno == 0 {
		resp.flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
	}
	unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
}

// answerListen answers a listen sent by WithListenNotify: it takes the
// caller's socket (pidfd_getfd: the same open socket, not a copy) and
// refuses (EACCES, as Landlock refuses a bind) a TCP socket bound to no
// port, which listen would bind to an ephemeral one; any other it listens
// on itself and answers with the outcome. Making the call here, rather
// than checking and letting it go on, leaves no moment in which another
// thread of the caller could put an unbound socket at the fd checked. It
// returns the errno answered.
func answerListen(fd int, req *seccompNotif) int {
	errno := func(err error) int {
		if e, ok := err.(unix.Errno); ok {
			return int(e)
		}
		return int(unix.EACCES)
	}
	pidfd, err := unix.PidfdOpen(int(req.pid), 0)
	if err != nil {
		respond(fd, req.id, int(unix.EACCES))
		return int(unix.EACCES)
	}
	defer unix.Close(pidfd)
	// The pid is the caller's, not one reused since it died.
	id := req.id
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id))); e != 0 {
		return 0
	}
	sock, err := unix.PidfdGetfd(pidfd, int(int32(req.args[0])), 0)
	if err != nil {
		respond(fd, req.id, errno(err))
		return errno(err)
	}
	defer unix.Close(sock)
	if unboundTCP(sock) {
		respond(fd, req.id, int(unix.EACCES))
		return int(unix.EACCES)
	}
	e := 0
	if err := unix.Listen(sock, int(int32(req.args[1]))); err != nil {
		e = errno(err)
	}
	resp := seccompNotifResp{id: req.id, error: -int32(e)}
	unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
	return e
}

// unboundTCP says whether sock is a TCP (or MPTCP) socket of IPv4 or IPv6
// bound to no port.
func unboundTCP(sock int) bool {
	domain, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil || domain != unix.AF_INET && domain != unix.AF_INET6 {
		return false
	}
	typ, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil || typ != unix.SOCK_STREAM {
		return false
	}
	proto, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	if err != nil || proto != unix.IPPROTO_TCP && proto != unix.IPPROTO_MPTCP {
		return false
	}
	sa, err := unix.Getsockname(sock)
	if err != nil {
		return true
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Port == 0
	case *unix.SockaddrInet6:
		return a.Port == 0
	}
	return true
}

// answerExec reads an exec call's path and argv and asks s.Exec about it,
// and answers it, or returns the later that will. The notification's id is
// checked after the read: if the caller died meanwhile, its pid may name
// another process, whose memory was read.
func (s *Supervisor) answerExec(fd int, req *seccompNotif) (c ExecCall, later func(context.Context) int) {
	dirfd, pathAt, argvAt, envAt := unix.AT_FDCWD, req.args[0], req.args[1], req.args[2]
	if int(req.nr) != execveNr() {
		// execveat(dirfd, path, argv, envp, flags)
		dirfd, pathAt, argvAt, envAt = int(int32(req.args[0])), req.args[1], req.args[2], req.args[3]
	}
	c, err := readExec(int(req.pid), pathAt, argvAt)
	if err == nil {
		c.Preload, err = readPreload(int(req.pid), envAt)
	}
	c.Dirfd = dirfd
	c.Files = &Files{}
	id := req.id
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id))); errno != 0 {
		return c, nil // the caller is gone: nothing to answer
	}
	if err != nil {
		respond(fd, req.id, int(unix.EACCES))
		return c, nil
	}
	errno, later := s.Exec(c)
	switch {
	case later != nil:
	case errno != 0:
		respond(fd, req.id, errno)
	default:
		continueChecked(fd, req, c)
	}
	return c, later
}

// continueChecked lets the exec of notification req, decided as c, go
// on, and makes sure the program it starts was given the argv that was
// decided. The argv was read from the caller's memory while the call
// waited; another thread of the caller's, or another process sharing its
// memory (a vfork child's parent's other threads), can rewrite it between
// that read and the kernel's own copy, so a command line no rule allowed
// would run. The kernel's copy is the new image's /proc/PID/cmdline, and
// nothing can change it before the image runs its first instruction: the
// supervisor attaches to the caller (PTRACE_SEIZE, which stops nothing)
// before it lets the call go on, so the caller stops at
// PTRACE_EVENT_EXEC, after the copy and before the new image runs; an
// image started with another argv is killed there. An exec that fails
// returns to the old image, which a PTRACE_INTERRUPT sent after the
// answer stops on its way (the answer is already given then, so the
// interrupt cannot cut the wait for it short), and the supervisor lets go.
//
// A caller that cannot be attached to (one a debugger in the sandbox
// traces) is refused, EACCES: its exec could not be checked so. With
// PTRACE_O_EXITKILL, a supervisor that dies meanwhile takes the caller
// with it rather than let it go unchecked.
func continueChecked(fd int, req *seccompNotif, c ExecCall) {
	// Every ptrace request of a tracee must come from the thread that
	// attached to it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := int(req.pid)
	// A thread other than the leader takes the leader's id as it execs
	// (de_thread): the new image is then waited for under that id.
	tgid := tid
	if pfd, err := unix.PidfdOpen(tid, 0); err == nil {
		unix.Close(pfd) // only a leader has a pidfd without PIDFD_THREAD
	} else if tgid = threadGroup(tid); tgid <= 0 {
		respond(fd, req.id, int(unix.EACCES))
		return
	}
	if _, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(tid), 0, unix.PTRACE_O_TRACEEXEC|unix.PTRACE_O_EXITKILL, 0, 0); errno != 0 {
		respond(fd, req.id, int(unix.EACCES))
		return
	}
	respond(fd, req.id, 0)
	unix.PtraceInterrupt(tid) // ESRCH: the exec has already renamed it, or it died
	for pid := tid; ; {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ECHILD && pid != tgid:
			pid = tgid // renamed by its exec
			continue
		case err != nil || ws.Exited() || ws.Signaled():
			return // gone: nothing runs
		case !ws.Stopped():
			continue
		}
		sig, event := 0, uint32(ws)>>16
		switch {
		case ws.StopSignal() == unix.SIGTRAP && event == unix.PTRACE_EVENT_EXEC:
			if !startedWith(wpid, c) || !startedFrom(wpid, execName(c)) || !c.Files.admits(wpid) || !preloads(wpid, c.Preload) {
				// Killed where it stands; its end is the tracer's to
				// collect, before its parent can.
				unix.Kill(wpid, unix.SIGKILL)
				for {
					if _, err := unix.Wait4(wpid, &ws, unix.WALL, nil); err != unix.EINTR && (err != nil || ws.Exited() || ws.Signaled()) {
						return
					}
				}
			}
		case event == unix.PTRACE_EVENT_STOP:
			// The interrupt, or a group stop: the exec failed.
		case event == 0:
			// A signal on the way back from a failed exec: it is
			// delivered as the caller detaches.
			sig = int(ws.StopSignal())
		}
		// A pending interrupt goes with the tracer.
		_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(wpid), 0, uintptr(sig), 0, 0)
		if errno != unix.ESRCH {
			return
		}
		// No longer in its stop: a SIGKILL (its command's end, or the
		// sandbox's) woke it. It stays this tracer's until its end is
		// collected here, and its parent, init, could never reap it:
		// wait on for that end.
		pid = wpid
	}
}

// startedWith reports whether the image process pid has just started
// (stopped at PTRACE_EVENT_EXEC) was given c's argv. Its cmdline is the
// kernel's copy: c.Argv's words, each ended by a NUL (a prefix of them
// when c.Argv is Truncated; one empty word, from kernels since 5.18, for
// an exec given none). For a file the kernel runs through an interpreter
// (a #! script, a binfmt_misc format) the kernel replaced argv[0] by the
// interpreter's words and the file's name: then the cmdline ends with
// that name and c.Argv[1:], and the file, found again in the caller's
// root, is no ELF file the kernel would have run itself. Anything else is
// an argv rewritten after it was read.
func startedWith(pid int, c ExecCall) bool {
	got, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	want := words(c.Argv)
	switch {
	case bytes.Equal(got, want):
		return true
	case c.Truncated:
		return bytes.HasPrefix(got, want)
	case len(c.Argv) == 0 && (len(got) == 0 || string(got) == "\x00"):
		return true
	}
	// A script given no argv has its name alone after the interpreter's
	// words (found by a tester: such an exec was killed).
	var rest []string
	if len(c.Argv) > 0 {
		rest = c.Argv[1:]
	}
	tail := words(append([]string{execName(c)}, rest...))
	if len(got) <= len(tail) || !bytes.HasSuffix(got, tail) || got[len(got)-len(tail)-1] != 0 {
		return false
	}
	// The file the check read was one the kernel does not run itself, or
	// the path leads to one now. The first holds for a path the second
	// cannot follow, one through /proc's links (found by a tester:
	// /proc/self/cwd/run.sh was killed).
	return c.Files.interpreted() || interpreted(pid, c)
}

// execName is the name the kernel gives the file c starts: its path
// as given, or, for an execveat from a directory descriptor, the path
// below /dev/fd/N.
func execName(c ExecCall) string {
	if c.Dirfd == unix.AT_FDCWD || strings.HasPrefix(c.Path, "/") {
		return c.Path
	}
	name := "/dev/fd/" + strconv.Itoa(c.Dirfd)
	if c.Path != "" {
		name += "/" + c.Path
	}
	return name
}

// startedFrom reports whether the image process pid has just started
// was started from the path name: the kernel's copy of the path it
// opened, which it leaves in the new image's memory (AT_EXECFN), and
// which a thread sharing the caller's memory can rewrite before the
// kernel reads it as well as argv.
func startedFrom(pid int, name string) bool {
	aux, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/auxv")
	if err != nil {
		return false
	}
	for i := 0; i+16 <= len(aux); i += 16 {
		key := *(*uint64)(unsafe.Pointer(&aux[i]))
		if key != atExecFn {
			continue
		}
		at := *(*uint64)(unsafe.Pointer(&aux[i+8]))
		got, cut, err := newRemotePages(pid).string(at, len(name)+1)
		return err == nil && !cut && got == name
	}
	return false
}

// atExecFn is the auxiliary vector's AT_EXECFN.
const atExecFn = 31

// words is argv as the kernel lays it out: each word ended by a NUL.
func words(argv []string) []byte {
	var b []byte
	for _, a := range argv {
		b = append(append(b, a...), 0)
	}
	return b
}

// interpreted reports whether the file c names in process pid's root
// (relative to its working directory, or to its descriptor c.Dirfd,
// which a file run through an interpreter from a descriptor keeps open
// in the new image) is one the kernel runs through an interpreter: it
// can be opened there and does not begin as an ELF file does. A path
// that cannot be followed so (one through /proc's links) counts as not
// interpreted.
func interpreted(pid int, c ExecCall) bool {
	proc, p := "/proc/"+strconv.Itoa(pid), c.Path
	if c.Dirfd != unix.AT_FDCWD && !strings.HasPrefix(p, "/") {
		dir, err := unix.Open(proc+"/fd/"+strconv.Itoa(c.Dirfd), unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return false
		}
		defer unix.Close(dir)
		how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
		if p == "" {
			// The descriptor's own file: reopened through /proc.
			fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(dir), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
			if err != nil {
				return false
			}
			defer unix.Close(fd)
			return notELF(fd)
		}
		fd, err := unix.Openat2(dir, p, &how)
		if err != nil {
			return false
		}
		defer unix.Close(fd)
		return notELF(fd)
	}
	if !strings.HasPrefix(p, "/") {
		cwd, err := os.Readlink(proc + "/cwd")
		root, err2 := os.Readlink(proc + "/root")
		switch {
		case err != nil || err2 != nil:
			return false
		case root == "/":
		case cwd == root:
			cwd = "/"
		case strings.HasPrefix(cwd, root+"/"):
			cwd = cwd[len(root):]
		default:
			return false
		}
		p = cwd + "/" + p
	}
	root, err := unix.Open(proc+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, p, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return notELF(fd)
}

// notELF reports whether fd is a regular file that does not begin as an
// ELF file does.
func notELF(fd int) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	var head [4]byte
	n, _ := unix.Pread(fd, head[:], 0)
	return n > 0 && string(head[:n]) != "\x7fELF"
}

// threadGroup returns the thread group (process) id of thread tid, from
// its /proc status; 0 when it cannot be read.
func threadGroup(tid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "Tgid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(rest))
			return n
		}
	}
	return 0
}

func execveNr() int {
	nr, _ := execNumbers(NativeArch())
	return nr
}

// How much of an exec's argv a supervisor reads: all that execve itself
// accepts, so that a rule about a command's words sees every word (a
// prefix would let `git <thousands of -c options> push` pass a rule
// about push), and no more, so a hostile argv cannot make the host
// allocate without end. The kernel refuses (E2BIG) a word longer than
// MAX_ARG_STRLEN, 32 pages with its NUL, and argv and envp whose strings
// and pointers together pass a quarter of the stack limit, at most 3/4 of
// _STK_LIM (8 MiB): 6 MiB. An argv read to these bounds without its end
// (Truncated) is one the kernel will refuse anyway, or one changed while
// it was read.
const (
	maxExecWord  = 128 << 10
	maxExecBytes = 6 << 20
)

// readExec reads an exec call's path and argv from process pid's memory.
func readExec(pid int, pathAt, argvAt uint64) (ExecCall, error) {
	c := ExecCall{Pid: pid}
	var err error
	// Two page caches, one for the pointer array and one for the strings,
	// which are each read a page at a time: an argv of many short words
	// costs a system call per page, not one per word.
	ptrs, strs := newRemotePages(pid), newRemotePages(pid)
	if pathAt != 0 {
		if c.Path, _, err = strs.string(pathAt, unix.PathMax); err != nil {
			return c, err
		}
	}
	total := 0
	for i := uint64(0); argvAt != 0; i++ {
		if total >= maxExecBytes {
			c.Truncated = true
			break
		}
		var p [8]byte
		if err := ptrs.read(argvAt+8*i, p[:]); err != nil {
			return c, err
		}
		at := *(*uint64)(unsafe.Pointer(&p[0]))
		if at == 0 {
			break
		}
		w, cut, err := strs.string(at, min(maxExecWord, maxExecBytes-total))
		if err != nil {
			return c, err
		}
		c.Truncated = c.Truncated || cut
		c.Argv = append(c.Argv, w)
		// What the kernel counts: the string, its NUL and its pointer.
		total += len(w) + 1 + 8
	}
	return c, nil
}

// readPreload returns the words of the environment at envAt in process
// pid's memory that load code into a dynamic program (IsPreload). Only
// their first bytes are read of the others.
func readPreload(pid int, envAt uint64) ([]string, error) {
	ptrs, strs := newRemotePages(pid), newRemotePages(pid)
	var out []string
	total := 0
	for i := uint64(0); envAt != 0 && total < maxExecBytes; i++ {
		var p [8]byte
		if err := ptrs.read(envAt+8*i, p[:]); err != nil {
			return nil, err
		}
		at := *(*uint64)(unsafe.Pointer(&p[0]))
		if at == 0 {
			break
		}
		total += 8
		head, _, err := strs.string(at, maxPreloadName)
		if err != nil {
			return nil, err
		}
		if name, _, ok := strings.Cut(head, "="); !ok || !slices.Contains(PreloadVars, name) {
			total += len(head)
			continue
		}
		w, _, err := strs.string(at, maxExecWord)
		if err != nil {
			return nil, err
		}
		total += len(w)
		if IsPreload(w) {
			out = append(out, w)
		}
	}
	return out, nil
}

// preloads says whether the image process pid has just started was given
// the preload words want: the kernel's copy of its environment, which
// another thread could have rewritten after it was read, as argv.
func preloads(pid int, want []string) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	var got []string
	for _, w := range strings.Split(string(env), "\x00") {
		if IsPreload(w) {
			got = append(got, w)
		}
	}
	return slices.Equal(got, want)
}

// remotePages reads another process's memory a page at a time, keeping
// the last page read.
type remotePages struct {
	pid  int
	page uint64 // the address of buf's page; valid once buf is set
	buf  []byte
}

func newRemotePages(pid int) *remotePages { return &remotePages{pid: pid} }

// at returns the bytes from addr to the end of its page.
func (r *remotePages) at(addr uint64) ([]byte, error) {
	page := addr &^ (pageSize - 1)
	if r.buf == nil || r.page != page {
		if r.buf == nil {
			r.buf = make([]byte, pageSize)
		}
		// A read never crosses into a page that might not be mapped.
		if err := readMem(r.pid, page, r.buf); err != nil {
			r.buf = nil
			return nil, err
		}
		r.page = page
	}
	return r.buf[addr-page:], nil
}

// read fills dst from addr, across pages if need be.
func (r *remotePages) read(addr uint64, dst []byte) error {
	for len(dst) > 0 {
		b, err := r.at(addr)
		if err != nil {
			return err
		}
		n := copy(dst, b)
		dst, addr = dst[n:], addr+uint64(n)
	}
	return nil
}

// string reads a NUL-terminated string of at most max bytes at addr; cut
// says it went on past max.
func (r *remotePages) string(addr uint64, max int) (string, bool, error) {
	var out []byte
	for len(out) < max {
		b, err := r.at(addr)
		if err != nil {
			return "", false, err
		}
		b = b[:min(len(b), max-len(out))]
		if i := bytes.IndexByte(b, 0); i >= 0 {
			if out == nil {
				return string(b[:i]), false, nil
			}
			return string(append(out, b[:i]...)), false, nil
		}
		out = append(out, b...)
		addr += uint64(len(b))
	}
	return string(out), true, nil
}

var pageSize = uint64(unix.Getpagesize())

// readMem fills buf from addr in process pid's memory, which must not
// cross a page boundary.
func readMem(pid int, addr uint64, buf []byte) error {
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(len(buf))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}
	n, err := unix.ProcessVMReadv(pid, local, remote, 0)
	if err != nil {
		return fmt.Errorf("read exec arguments of process %d: %w", pid, err)
	}
	if n != len(buf) {
		return fmt.Errorf("read exec arguments of process %d: short read", pid)
	}
	return nil
}

// listenerWait waits for a listener to have a notification queued, or to
// have no user left, or for a stop pipe to be readable or closed. It waits
// in the runtime's network poller, on non-blocking duplicates of the two
// fds, so that a supervisor with nothing to answer holds no thread: a
// daemon has one per session, most of them idle. Where the poller cannot
// take the listener, it polls on a thread of its own, as a blocking
// poll(2).
type listenerWait struct {
	fd, stop int
	f, sf    *os.File // nil: poll(2)
	rc       syscall.RawConn
}

func newListenerWait(fd, stop int) *listenerWait {
	w := &listenerWait{fd: fd, stop: stop}
	f, err := pollwait.Dup(fd, "seccomp listener")
	if err != nil {
		return w
	}
	sf, err := pollwait.Dup(stop, "supervisor stop")
	if err != nil {
		f.Close()
		return w
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		sf.Close()
		return w
	}
	w.f, w.sf, w.rc = f, sf, rc
	go func() {
		// Readable or closed at the other end: either way, stop. A
		// deadline in the past wakes the listener's wait.
		var b [1]byte
		sf.Read(b[:])
		f.SetReadDeadline(time.Unix(1, 0))
	}()
	return w
}

// wait returns true once a notification is queued, false once the
// listener has no user left or the stop pipe fired.
func (w *listenerWait) wait() bool {
	if w.f == nil {
		for {
			pfd := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(w.stop), Events: unix.POLLIN}}
			if _, err := unix.Poll(pfd, -1); err != nil {
				if err == unix.EINTR {
					continue
				}
				return false
			}
			if pfd[1].Revents != 0 || pollwait.Gone(pfd[0].Revents) {
				return false
			}
			if pfd[0].Revents&unix.POLLIN != 0 {
				return true
			}
		}
	}
	var ready, gone bool
	err := w.rc.Read(func(fd uintptr) bool {
		revents, err := pollwait.Now(fd)
		gone = err != nil || pollwait.Gone(revents)
		ready = revents&unix.POLLIN != 0
		return gone || ready
	})
	return err == nil && !gone && ready
}

func (w *listenerWait) close() {
	if w.f != nil {
		w.f.Close()
		w.sf.Close() // ends the stop goroutine's read
	}
}

// callerPoll is how often whileCallerWaits looks whether a call's caller
// still waits for its answer.
const callerPoll = 200 * time.Millisecond

// whileCallerWaits is ctx, ended too once the notification id is no
// longer valid: its caller died (or was killed) while its call waited.
// done stops the watch.
func whileCallerWaits(ctx context.Context, fd int, id uint64) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(callerPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				v := id
				if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&v))); e != 0 {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}
