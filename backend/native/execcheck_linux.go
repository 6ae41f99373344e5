package native

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/hostinfo"
	"github.com/moatbox/moat/internal/seccomp"
	"github.com/moatbox/moat/internal/shebang"
)

// Checking each exec (Stdio.CheckExec). The observed filter also sends
// every execve and execveat to the host (seccomp.WithExecNotify), whose
// supervisor reads the program's path and argv from the caller's memory
// and asks CheckExec; the call then goes on untouched
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE) or fails with EACCES. A process has
// one listener, so the check rides on the filter that is observed anyway.
// The rules that decide live on the host, so only a start whose listener
// reaches the host can check: the direct start. And the listener must
// reach the host before the command's own first exec, which waits for an
// answer: init sends it before it forks the command, not after.

// execFilters returns the filters of a run that checks each exec: a run
// without any (syscalls.profile "unconfined") gets one that lets every
// call through and only sends the execs to the host. It fails (wrapping
// backend.ErrNoExecCheck) where the check cannot be made.
func execFilters(spec *backend.Spec, filters [][]seccomp.Instruction, direct bool) ([][]seccomp.Instruction, error) {
	if major, minor := hostinfo.KernelVersion(); major < 5 || major == 5 && minor < 5 {
		return nil, fmt.Errorf("%w: Linux %d.%d lacks SECCOMP_USER_NOTIF_FLAG_CONTINUE (5.5)", backend.ErrNoExecCheck, major, minor)
	}
	if scope := ptraceScope(); scope >= 3 || scope == 2 && os.Geteuid() != 0 {
		// The supervisor follows each exec it lets go on into the image
		// it starts (PTRACE_SEIZE), to check the argv the kernel copied:
		// Yama's scope 2 keeps ptrace for root, 3 for nobody.
		return nil, fmt.Errorf("%w: kernel.yama.ptrace_scope %d forbids the ptrace the check follows each exec with", backend.ErrNoExecCheck, scope)
	}
	if len(filters) == 0 {
		filters = [][]seccomp.Instruction{seccomp.PassThrough()}
	}
	if direct {
		if _, err := execObserved(spec, filters); err != nil {
			return nil, err
		}
	}
	return filters, nil
}

// listenChecked says whether spec's TCP bind rule needs each listen sent
// to the host (seccomp.WithListenNotify): Landlock checks the port a bind
// names, but a TCP socket listened on unbound gets an ephemeral port from
// the kernel with no bind hook called. A rule that allows port 0 (any
// ephemeral port) needs no check.
func listenChecked(spec *backend.Spec) bool {
	n := spec.Network
	return n.RestrictBind && !slices.Contains(n.BindPorts, 0)
}

// errNoListenCheck refuses a TCP bind rule with no seccomp filter to
// carry the check of each listen (see listenChecked).
var errNoListenCheck = errors.New("network.tcp_bind needs a seccomp filter, which checks each listen() for a port the rule never saw; this run has none")

// ptraceScope is Yama's kernel.yama.ptrace_scope, 0 without Yama.
func ptraceScope() int {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// execObserved returns which of a direct start's filters carries the
// listener and the exec check, or an error wrapping
// backend.ErrNoExecCheck naming what is missing. (The init stage installs
// every filter itself before it forks the command, and uses the first.)
func execObserved(spec *backend.Spec, filters [][]seccomp.Instruction) (int, error) {
	fail := func(why string) (int, error) {
		return -1, fmt.Errorf("%w: %s", backend.ErrNoExecCheck, why)
	}
	if !spec.SeccompAtExec {
		return 0, nil
	}
	// A custom profile is installed by the command itself, after init
	// has forked it: the floor under it, installed by init, carries the
	// check instead (and the custom profile's own refusals go unreported).
	if len(filters) < 2 {
		return fail("a custom seccomp profile is installed by the command, too late to hand its listener over, and there is no filter under it")
	}
	return 1, nil
}

// execChecker is the supervisor's Exec for stdio.CheckExec. A program
// that does not exist fails with ENOENT unasked: a shell searching its
// PATH tries each directory in turn, and neither the rules nor a person
// should see the misses.
//
// In the init stage the first exec notified is the command's own: init
// installs the filter, then starts the command, and nothing else in the
// sandbox exists before it (initFirst). The direct start's filter lets
// that exec through unnotified (seccomp.FirstExec).
func execChecker(check func(backend.ExecCall) error, initFirst bool) func(seccomp.ExecCall) (int, func(context.Context) int) {
	var seen atomic.Bool
	return func(c seccomp.ExecCall) (int, func(context.Context) int) {
		if missing(c) {
			return int(unix.ENOENT), nil
		}
		// The command's own exec is the first that finds its program
		// (init's search may miss in PATH directories before it).
		first := initFirst && seen.CompareAndSwap(false, true)
		path := c.Path
		if path == "" {
			// A start from a descriptor (fexecve): the program is named by
			// the file it holds, as one started from a path is by the path.
			// One that cannot be named is refused, not judged by its argv,
			// which the caller chose.
			var err error
			if path, err = os.Readlink("/proc/" + strconv.Itoa(c.Pid) + "/fd/" + strconv.Itoa(c.Dirfd)); err != nil {
				return int(unix.EACCES), nil
			}
		}
		// The program, and the interpreters of its #! lines, each opened
		// once: the check decides on these files, and the image the
		// kernel starts must be the one they lead to. One that cannot be
		// opened is refused: its exec would run a file nobody read.
		pins, err := pinExec(c)
		if err != nil {
			return int(unix.EACCES), nil
		}
		// The caller's directory, read while its call waits: the kernel
		// names it from the caller's root, as the command sees it.
		dir, _ := os.Readlink("/proc/" + strconv.Itoa(c.Pid) + "/cwd")
		// Resolved: the file the program is, as the host names it. The
		// rules decide on its base name too, so a program cannot pass a
		// rule by being started under another name (a link to git, a
		// descriptor holding git, /proc/self/fd/3); resolved in the
		// caller's root, a link's target means what it means there.
		err = check(backend.ExecCall{Pid: c.Pid, Path: path, Dir: dir, Argv: c.Argv, Truncated: c.Truncated, Preload: c.Preload, First: first, Resolved: fdName(pins.prog),
			Open: pins.open})
		var p *backend.ExecPending
		if errors.As(err, &p) {
			return 0, func(ctx context.Context) int {
				defer pins.close()
				if p.Wait(ctx) != nil {
					return int(unix.EACCES)
				}
				return 0
			}
		}
		pins.close()
		if err != nil {
			return int(unix.EACCES), nil
		}
		return 0, nil
	}
}

// execPins are the files an exec's check reads, each opened (O_PATH) once
// while the call waits: the program, and the interpreter of each #! line
// from it on, by the path the line gives. The check reads them through
// open, and the image the kernel then starts must be the last of them
// (noted in the call's seccomp.Files), or, where that file is neither an
// ELF file nor a script, one of the host's binfmt_misc interpreters. A
// path swapped for another file after the check read it, or between two
// of its reads, is then killed at its first instruction (found by a
// tester: the check opened the program by path four times, and a file
// that was true at the first and git at another ran git as decided for
// true).
type execPins struct {
	pid    int
	prog   int            // the program
	interp map[string]int // each interpreter, by its #! line's path
}

// maxScripts is how many #! lines the kernel follows (BINPRM_MAX_RECURSION
// is 4 interpreters below the program): one more is ELOOP.
const maxScripts = 5

func pinExec(c seccomp.ExecCall) (*execPins, error) {
	fd, err := openIn(c.Pid, c.Dirfd, c.Path)
	if err != nil {
		return nil, err
	}
	pins := &execPins{pid: c.Pid, prog: fd, interp: map[string]int{}}
	elf := false
	for i := range maxScripts {
		head, readable := firstBytes(fd)
		if i == 0 && readable && !bytes.HasPrefix(head, []byte("\x7fELF")) {
			c.Files.Interpreted()
		}
		interp, _, script := shebang.Parse(head)
		if !script || !readable {
			elf = readable && bytes.HasPrefix(head, []byte("\x7fELF"))
			break
		}
		if _, seen := pins.interp[interp]; seen {
			break // a loop, which the kernel ends with ELOOP
		}
		// An interpreter missing now may be there when the kernel looks:
		// the script itself is noted then, which no image can be.
		next, err := openIn(c.Pid, unix.AT_FDCWD, interp)
		if err != nil {
			break
		}
		pins.interp[interp], fd = next, next
	}
	if !c.Files.Note(fd, elf) {
		pins.close()
		return nil, errors.New("the program's file cannot be told")
	}
	return pins, nil
}

// firstBytes reads the first shebang.BufSize bytes of the file open
// (O_PATH) at fd; false when it cannot be read.
func firstBytes(fd int) ([]byte, bool) {
	f, err := reopenFile(fd)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	buf := make([]byte, shebang.BufSize)
	n, _ := io.ReadFull(f, buf)
	return buf[:n], true
}

// open is backend.ExecCall.Open: "" is the program, a path a #! line
// gave its pinned interpreter, any other path opened as the caller's
// execve would find it.
func (p *execPins) open(path string) (*os.File, error) {
	if path == "" {
		return reopenFile(p.prog)
	}
	if fd, ok := p.interp[path]; ok {
		return reopenFile(fd)
	}
	return openFile(p.pid, unix.AT_FDCWD, path)
}

func (p *execPins) close() {
	unix.Close(p.prog)
	for _, fd := range p.interp {
		unix.Close(fd)
	}
}

// missing reports whether the program c names is certainly absent from
// the caller's view: its path, resolved in the caller's root (or beneath its
// working directory), is not there. Either answer fails closed: a
// program wrongly found is checked, one wrongly missed does not run.
func missing(c seccomp.ExecCall) bool {
	if c.Path == "" || c.Dirfd != unix.AT_FDCWD {
		return false // an fexecve, or a path relative to a directory fd
	}
	proc := "/proc/" + strconv.Itoa(c.Pid)
	if fd, ok := ownFD(c.Path); ok {
		// /proc/self in the caller's root would name this process, not
		// the caller: its descriptor is looked at where the host sees it.
		_, err := os.Readlink(proc + "/fd/" + fd)
		return errors.Is(err, os.ErrNotExist)
	}
	if strings.HasPrefix(path.Clean(c.Path), "/proc/") {
		return false // another /proc name: see resolve; counted as found
	}
	base, how := proc+"/root", unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT}
	if !strings.HasPrefix(c.Path, "/") {
		// Beneath the working directory: an absolute link or a ".." that
		// climbs out of it is not followed (the path counts as found), as
		// it would be from the host's root, telling whether a host path
		// exists.
		base, how.Resolve = proc+"/cwd", unix.RESOLVE_BENEATH|unix.RESOLVE_NO_MAGICLINKS
	}
	dir, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, c.Path, &how)
	if err == nil {
		unix.Close(fd)
	}
	if err != unix.ENOENT && err != unix.ENOTDIR {
		return false
	}
	if strings.HasPrefix(c.Path, "/") {
		// A link into /proc (/dev/fd/3, one to /proc/self/fd/3) leads
		// nowhere for openat2 alone: the path is walked as the caller's
		// exec would (see walkIn) before it is called missing.
		fd, err = openIn(c.Pid, unix.AT_FDCWD, c.Path)
		if err == nil {
			unix.Close(fd)
		}
	}
	return err == unix.ENOENT || err == unix.ENOTDIR
}

// ownFD returns N when p names the caller's own descriptor N:
// /proc/self/fd/N, /proc/thread-self/fd/N or /dev/fd/N, as written. A
// path that is so only once cleaned lexically is not (the walk decides
// it): a ".." after a link leaves the link's target, so
// /tmp/l/../../proc/self/fd/3 may be a file of /tmp's.
func ownFD(p string) (string, bool) {
	if p != path.Clean(p) {
		return "", false
	}
	for _, dir := range []string{"/proc/self/fd/", "/proc/thread-self/fd/", "/dev/fd/"} {
		if n, ok := strings.CutPrefix(p, dir); ok {
			if _, err := strconv.Atoi(n); err == nil {
				return n, true
			}
		}
	}
	return "", false
}

// fdName is the name of a descriptor of this process as a program's
// name (see named).
func fdName(fd int) string { return named(os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))) }

// errUnresolved is openIn's error for a path it cannot follow in the
// caller's view (a directory outside the caller's root as the host sees
// it, a name with no file behind it).
var errUnresolved = errors.New("the path cannot be followed in the caller's view")

// openIn opens (O_PATH) the file process pid reaches by path p, relative
// to its descriptor dirfd (or its working directory for AT_FDCWD), as its
// execve would: in its root, links followed (into /proc too: see walkIn),
// /proc/self/fd/N and /dev/fd/N its own descriptors. p "" is the file
// dirfd holds (fexecve).
func openIn(pid, dirfd int, p string) (int, error) {
	proc := "/proc/" + strconv.Itoa(pid)
	if p == "" {
		return unix.Open(proc+"/fd/"+strconv.Itoa(dirfd), unix.O_PATH|unix.O_CLOEXEC, 0)
	}
	if fd, ok := ownFD(p); ok {
		return unix.Open(proc+"/fd/"+fd, unix.O_PATH|unix.O_CLOEXEC, 0)
	}
	switch {
	case dirfd != unix.AT_FDCWD && !strings.HasPrefix(p, "/"):
		// Relative to a directory descriptor of the caller's.
		dir, err := os.Readlink(proc + "/fd/" + strconv.Itoa(dirfd))
		if err != nil || !strings.HasPrefix(dir, "/") {
			return -1, errUnresolved
		}
		p = inRoot(proc, dir, p)
	case !strings.HasPrefix(p, "/"):
		cwd, err := os.Readlink(proc + "/cwd")
		if err != nil || !strings.HasPrefix(cwd, "/") {
			return -1, errUnresolved
		}
		p = inRoot(proc, cwd, p)
	}
	if p == "" {
		return -1, errUnresolved
	}
	root, err := unix.Open(proc+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(root)
	// Most paths meet no link the host follows otherwise than the caller
	// (those fail here): one system call.
	fd, err := unix.Openat2(root, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err == nil {
		return fd, nil
	}
	return walkIn(proc, root, p)
}

// maxLinks is how many symbolic links one path may pass through, as
// the kernel counts them (MAXSYMLINKS).
const maxLinks = 40

// walkIn opens (O_PATH) the file the absolute path p names in the
// caller's root (root, of process proc), following its links one at a
// time as the kernel follows them for the caller. openat2's
// RESOLVE_IN_ROOT cannot: in the caller's /proc, self and thread-self
// name the reader (the host, which has no pid there), and the magic links
// (a process's fd/N, exe, cwd, root) are not followed at all, so a link
// to /proc/PID/fd/3, a path through /dev/fd or /proc/PID/cwd, named a
// program only by its own name, or by none. Here /proc/self is the
// caller's pid, a magic link is followed to the file it holds, and the
// walk goes on from that file's place in the caller's root.
func walkIn(proc string, root int, p string) (int, error) {
	cur, rest, links := "/", strings.Split(p, "/"), 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur) // cur has no link left in it
			continue
		}
		if cur == "/proc" && (name == "self" || name == "thread-self") {
			cur = "/proc/" + nsPid(proc)
			continue
		}
		dir, err := unix.Openat2(root, cur, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS})
		if err != nil {
			return -1, err
		}
		fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(dir)
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(dir)
			unix.Close(fd)
			return -1, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			unix.Close(dir)
			if len(rest) == 0 {
				return fd, nil
			}
			unix.Close(fd)
			cur = path.Join(cur, name)
			continue
		}
		unix.Close(fd)
		if links++; links > maxLinks {
			unix.Close(dir)
			return -1, unix.ELOOP
		}
		if magic(dir, cur) {
			// Followed as the kernel follows it, to the file it holds.
			fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_CLOEXEC, 0)
			unix.Close(dir)
			if err != nil {
				return -1, err
			}
			if len(rest) == 0 {
				return fd, nil
			}
			at, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
			unix.Close(fd)
			if err != nil || !strings.HasPrefix(at, "/") {
				return -1, errUnresolved
			}
			if cur = inRoot(proc, at, ""); cur == "" {
				return -1, errUnresolved // outside the caller's root
			}
			cur = path.Clean(cur) // the name of a file: no link in it
			continue
		}
		target, err := readlinkat(dir, name)
		unix.Close(dir)
		if err != nil {
			return -1, err
		}
		if strings.HasPrefix(target, "/") {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return unix.Openat2(root, cur, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS})
}

// magic reports whether the links of directory dir (named cur in the
// caller's root) are procfs's magic links: every link below a process's
// directory (/proc/N/fd/M, exe, cwd, root, ns/...) is one; those of
// /proc itself (self, mounts, net) are links like others.
func magic(dir int, cur string) bool {
	if cur == "/proc" || !strings.HasPrefix(cur, "/proc/") {
		return false
	}
	var st unix.Statfs_t
	return unix.Fstatfs(dir, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}

// readlinkat is readlink(2) relative to a directory descriptor.
func readlinkat(dir int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		b := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, b)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(b[:n]), nil
		}
	}
}

// openFile opens for reading the regular file process pid reaches by
// path (see openIn), named as the host names it; a device or a FIFO is
// not opened (reading it could block, or act).
func openFile(pid, dirfd int, p string) (*os.File, error) {
	fd, err := openIn(pid, dirfd, p)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return reopenFile(fd)
}

// reopenFile opens for reading the regular file open (O_PATH) at fd, as
// openFile says.
func reopenFile(fd int) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errUnresolved
	}
	rfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		if st.Uid == 0 {
			// A file of the host's root that moat, not root, may not
			// read (sudo is mode 4111 on some systems): nothing in the
			// sandbox made it, so it is not refused for that (see
			// backend.ExecCall.Open).
			return nil, errSystemUnreadable
		}
		return nil, err
	}
	return os.NewFile(uintptr(rfd), fdName(fd)), nil
}

// errSystemUnreadable is openFile's error for a file of the host's root
// that moat may not read.
var errSystemUnreadable = errors.New("a file of the host's root that moat may not read")

// inRoot returns rel, relative to dir (a path as the host names it),
// as a path in the root of process proc; "" when dir is not inside
// that root as the host names it. rel is not cleaned: a ".." after a
// link in it leaves the link's target, as the kernel walks it
// (./l/../s, l a link to sub/deep, is sub/s, not ./s).
func inRoot(proc, dir, rel string) string {
	root, err := os.Readlink(proc + "/root")
	if err != nil {
		return ""
	}
	switch {
	case root == "/":
	case dir == root:
		dir = "/"
	case strings.HasPrefix(dir, root+"/"):
		dir = dir[len(root):]
	default:
		return ""
	}
	return strings.TrimSuffix(dir, "/") + "/" + rel
}

// nsPid returns process proc's pid in its own pid namespace (the last of
// NSpid in its status), or "0", which names no process.
func nsPid(proc string) string {
	b, err := os.ReadFile(proc + "/status")
	if err != nil {
		return "0"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[len(f)-1]
			}
		}
	}
	return "0"
}

// named is a descriptor's link as a program's name: "" for a file that
// has none to decide on (a memfd, an anonymous inode, a deleted file).
func named(link string, err error) string {
	if err != nil || !strings.HasPrefix(link, "/") || strings.HasSuffix(link, " (deleted)") || strings.HasPrefix(link, "/memfd:") {
		return ""
	}
	return link
}

// superviseInit makes the channel on which the init stage sends its
// exec-checking listener (initSpec.ExecFD) and starts the host's
// supervisor on it, which stops when the run ends. It returns init's end
// of the channel, for init to inherit.
func (r *run) superviseInit(prog []seccomp.Instruction) (*os.File, error) {
	host, child, err := socketPair()
	if err != nil {
		return nil, fmt.Errorf("seccomp listener channel: %w", err)
	}
	stop, stopW, err := pipe(false)
	if err != nil {
		host.Close()
		child.Close()
		return nil, fmt.Errorf("supervisor pipe: %w", err)
	}
	r.stopSup, r.supDone, r.initSupervised = stopW, make(chan struct{}), true
	// Run in reverse: the supervisor stops before its channel closes.
	r.cleanup = append(r.cleanup, func() { host.Close() }, r.stopSupervisor)
	go r.supervise(host, stop, prog)
	return child, nil
}

// installExecChecked is init's side: it installs prog observed and
// sending the host what n says (each exec to check; a session's each
// setsid: see attribute; each listen: see listenChecked), and sends the
// listener to the host on chanFD.
func installExecChecked(prog []seccomp.Instruction, chanFD int, n seccomp.Notify) error {
	fd, err := seccomp.InstallObservedNotify(prog, n)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	defer unix.Close(chanFD)
	if err := unix.Sendmsg(chanFD, []byte{0}, unix.UnixRights(fd), nil, 0); err != nil {
		return fmt.Errorf("send the seccomp listener to the host: %w", err)
	}
	return nil
}

// execArrays puts the command's argv and envp arrays (the strings stay
// where p.str puts them) in memory of their own, mapped where the
// kernel's address-space randomisation places it: their addresses name
// the command's own exec to the exec-checking filter (seccomp.FirstExec),
// so they must be neither readable from the sandbox nor guessable, as
// addresses in Go's heap are.
func (p *plan) execArrays(args, env []string) (argv, envv uintptr, err error) {
	n := (len(args) + 1 + len(env) + 1) * int(unsafe.Sizeof(uintptr(0)))
	size := (n + unix.Getpagesize() - 1) &^ (unix.Getpagesize() - 1)
	m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0, 0, fmt.Errorf("map the command's arguments: %w", err)
	}
	p.mapped = append(p.mapped, m)
	v := unsafe.Slice((*uintptr)(unsafe.Pointer(&m[0])), len(args)+1+len(env)+1)
	for i, a := range args {
		v[i] = p.str(a)
	}
	for i, e := range env {
		v[len(args)+1+i] = p.str(e)
	}
	return uintptr(unsafe.Pointer(&v[0])), uintptr(unsafe.Pointer(&v[len(args)+1])), nil
}

// unmap releases the plan's memory outside Go's heap, once no process
// can read it any more.
func (p *plan) unmap() {
	for _, m := range p.mapped {
		unix.Munmap(m)
	}
	p.mapped = nil
}
