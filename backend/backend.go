// Package backend is the contract between moat's policy layer and the
// mechanisms that isolate a command: the resolved, JSON-serialisable Spec,
// the Backend interface (a one-shot Run), the Lifecycle of a sandbox that
// lives across commands (Create an Instance, Exec a Process in it with a
// ProcessSpec, Destroy it), Capabilities, and the ExitStatus a backend
// returns.
//
// It owns no mechanism and reads no policy file: everything a backend needs
// to run a command is in the Spec, already resolved (absolute paths, concrete
// ids, byte counts), so a backend never has to make a policy decision and a
// Spec can cross a process boundary (the native backend passes it to its init
// stage on a pipe).
package backend

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/moatbox/moat/internal/seccomp"
	"github.com/moatbox/moat/internal/termsafe"
)

// Spec is everything one run needs, resolved. It is produced by the sandbox
// package's compile step and consumed by a Backend. The zero value is not
// useful; fields documented as optional may be left zero.
type Spec struct {
	// RunID names the run in cgroups, audit events and reports.
	RunID string `json:"run_id"`
	// Args is the command line. Args[0] is looked up in the PATH of Env
	// inside the sandbox when it contains no slash.
	Args []string `json:"args"`
	// Env is the complete environment of the command ("NAME=value").
	Env []string `json:"env"`
	// Dir is the working directory inside the sandbox.
	Dir string `json:"dir"`
	// Hostname is the sandbox's host name (UTS namespace).
	Hostname string `json:"hostname"`
	// Mounts build the sandbox's file system view, in order. Parents come
	// before children; masks come last.
	Mounts []Mount `json:"mounts"`
	// User is the identity the command runs as.
	User Identity `json:"user"`
	// Limits bound the run's resources.
	Limits Limits `json:"limits"`
	// Network describes the sandbox's network. Only NetNone is implemented.
	Network Network `json:"network"`
	// MaskPaths are hidden inside /proc (files shown as empty, directories
	// as empty read-only tmpfs); ReadOnlyPaths are made read-only.
	MaskPaths     []string `json:"mask_paths"`
	ReadOnlyPaths []string `json:"read_only_paths"`
	// Seccomp are the system-call filters stacked on the command, in
	// order (the kernel runs all of them; the strictest answer wins).
	// Empty means no filter, which only the "unconfined" profile asks for.
	Seccomp []*seccomp.Profile `json:"seccomp,omitempty"`
	// SeccompAtExec says Seccomp[0] is a profile written for the command
	// (a custom one): it is installed by the command's process just before
	// its execve, as runc does, so that it never constrains the sandbox's
	// init. The filters after it are installed in init, which the command
	// inherits them from.
	SeccompAtExec bool `json:"seccomp_at_exec,omitempty"`
	// CheckFirstExec says the command's own exec goes to the exec check
	// too (Stdio.CheckExec, with First set), which the direct start
	// otherwise lets through unasked: the caller could not decide before
	// the run which file it is (an overlay's change set, a directory the
	// sandbox's user cannot search, a mask over its path).
	CheckFirstExec bool `json:"check_first_exec,omitempty"`
	// Landlock asks for Landlock rules derived from the mounts, as far as
	// the kernel supports them (backends without Landlock ignore it).
	Landlock bool `json:"landlock"`
	// CountCPU asks an Instance (Lifecycle.Create) whose CPU time
	// (Stats.CPU, CPUCounter) counts every process the sandbox had,
	// those the kernel reaped without anyone waiting for them included
	// (a parent that ignores SIGCHLD): a session's cpu budget is read
	// from it. A backend that cannot count them all here fails Create
	// with ErrNoCPUCount. It stays on the host.
	CountCPU bool `json:"count_cpu,omitempty"`
}

// MountKind says what a Mount operation does.
type MountKind string

// The mount operations a Spec may contain.
const (
	// MountBind binds Source (a host path) at Target; ReadOnly makes the
	// whole subtree read-only. IDMap asks that files owned by the owner of
	// Source appear owned by the sandbox user (and land owned by that owner
	// on the host): used for the workspace when the host side runs as root.
	MountBind MountKind = "bind"
	// MountTmpfs mounts an empty tmpfs at Target with Options (e.g.
	// "mode=1777,size=1g").
	MountTmpfs MountKind = "tmpfs"
	// MountSymlink creates a symbolic link at Target pointing to Source.
	MountSymlink MountKind = "symlink"
	// MountMask hides Target: a file becomes an empty unreadable file, a
	// directory an empty read-only tmpfs. A missing Target fails the run
	// unless the mount is Optional.
	MountMask MountKind = "mask"
	// MountReadOnly re-binds an already mounted Target read-only (used to
	// protect paths inside a writable workspace).
	MountReadOnly MountKind = "readonly"
	// MountPin binds an already mounted directory Target onto itself,
	// writable: the command can change what is inside but can neither
	// rename nor remove Target, since the kernel refuses both for a mount
	// point (EBUSY). It keeps the directories above a protected path in
	// place, so that a protected path cannot be moved aside and remade.
	MountPin MountKind = "pin"
	// MountProc mounts a fresh procfs for the sandbox's PID namespace.
	MountProc MountKind = "proc"
	// MountOverlay mounts a copy-on-write view at Target: Source (a host
	// directory) is the read-only lower layer, and every change goes to
	// Layers/upper (Layers/work is overlayfs's scratch directory; both
	// must exist and be empty the first time). Source itself is never
	// written. IDMap is as for MountBind, for the lower layer.
	MountOverlay MountKind = "overlay"
	// MountDev builds a minimal /dev: null, zero, full, random, urandom,
	// tty, a private devpts, ptmx, shm and the fd symlinks.
	MountDev MountKind = "dev"
	// MountFile puts a read-only file with the content Data at Target
	// (over an existing one): the sandbox's own /etc/passwd, say.
	MountFile MountKind = "file"
)

// Mount is one operation in building the sandbox's root.
type Mount struct {
	Kind     MountKind `json:"kind"`
	Source   string    `json:"source,omitempty"`
	Target   string    `json:"target"`
	ReadOnly bool      `json:"read_only,omitempty"`
	Options  string    `json:"options,omitempty"`
	IDMap    bool      `json:"idmap,omitempty"`
	// Data is the content of a MountFile.
	Data string `json:"data,omitempty"`
	// Layers is the host directory holding "upper" and "work", for
	// MountOverlay.
	Layers string `json:"layers,omitempty"`
	// Owner, when above 0, is the only owner a bind's or an overlay's
	// Source may have, checked on the tree opened, not on the path: a
	// daemon's tenant names paths it could swap for a link between the
	// daemon's check and the mount, and only its own files may be mapped
	// to the sandbox user. A backend that cannot check it on what it
	// mounts refuses the Spec.
	Owner int `json:"owner,omitempty"`
	// OpenUID, when above 0, is the user who named a bind's or an
	// overlay's Source (a daemon's tenant): the Source is resolved and
	// opened with that user's filesystem rights (OpenUID, OpenGID, and
	// OpenGroups as its supplementary groups), not the backend's. A path that user could
	// not reach itself is then refused (or skipped, if Optional) exactly
	// as a missing one is, the error naming Target: the backend, root
	// maybe, tells it nothing about other users' files. A backend that
	// cannot open it so refuses the Spec.
	OpenUID    int   `json:"open_uid,omitempty"`
	OpenGID    int   `json:"open_gid,omitempty"`
	OpenGroups []int `json:"open_groups,omitempty"`
	// Optional skips the operation when Source (or Target for masks and
	// read-only re-binds) does not exist, instead of failing the run.
	// Without it a missing path fails the run with a *GoneError: a mask
	// or a read-only bind in a tree the command may write must not be
	// skipped, or the command could create the path and use it.
	Optional bool `json:"optional,omitempty"`
	// NoLandlockGrant leaves this mount out of the Landlock rules (on
	// backends that use Landlock), so only the mount layer grants access
	// to it. It can only make a run stricter; tests use it to check that
	// Landlock holds on its own.
	NoLandlockGrant bool `json:"no_landlock_grant,omitempty"`
}

// Identity is who the command is, inside and on the host.
type Identity struct {
	// UID and GID inside the sandbox (never 0).
	UID int `json:"uid"`
	GID int `json:"gid"`
	// HostUID and HostGID are the host ids the inside ids map to: the
	// caller's own ids for an unprivileged caller, a dedicated unprivileged
	// id when the caller is root.
	HostUID int `json:"host_uid"`
	HostGID int `json:"host_gid"`
}

// CPUHit says whether a command that died of signal sig having used cpu
// was ended by l's CPU-time limit: SIGXCPU (RLIMIT_CPU's soft limit) once
// its processes had used half of it, since the rusage the run sums is
// sampled from ticks and falls short of the exact time the kernel holds
// to the limit (by more than a tick under load), or SIGKILL (the hard
// limit's) once they had used nearly all of it. A command can raise the
// signal itself (kill -XCPU $$), which is no limit (the report said the
// limit was reached after a millisecond; found by a tester).
func (l Limits) CPUHit(sig syscall.Signal, cpu time.Duration) bool {
	switch {
	case l.CPUTime <= 0:
		return false
	case sig == syscall.SIGXCPU:
		return cpu >= l.CPUTime/2
	case sig == syscall.SIGKILL:
		// Any kill is a SIGKILL (the OOM killer's, the command's own):
		// the hard limit's comes a second past the soft one, so nearly
		// the whole limit must have been used.
		return cpu >= l.CPUTime*9/10
	}
	return false
}

// FileSizeHit says whether a command that died of signal sig was ended by
// l's file-size limit (SIGXFSZ under RLIMIT_FSIZE): without a limit, the
// command raised it itself.
func (l Limits) FileSizeHit(sig syscall.Signal) bool {
	return sig == syscall.SIGXFSZ && l.FileSize > 0
}

// Limits bound a run. A zero field means no limit.
type Limits struct {
	Wall        time.Duration `json:"wall"`
	CPUTime     time.Duration `json:"cpu_time"`
	OpenFiles   uint64        `json:"open_files"`
	FileSize    uint64        `json:"file_size"`
	OutputBytes int64         `json:"output_bytes"`
	MemoryBytes int64         `json:"memory_bytes"`
	Pids        int64         `json:"pids"`
	// PidsRlimit enforces Pids with RLIMIT_NPROC instead of a cgroup
	// (see Capabilities.PidsBy).
	PidsRlimit bool    `json:"pids_rlimit,omitempty"`
	CPUs       float64 `json:"cpus"`
	// DiskBytes bounds what the run may write to its own storage: /tmp,
	// home, /dev/shm and an overlay workspace's changes together.
	DiskBytes int64 `json:"disk_bytes"`
}

// TmpfsOptions are the size options of a tmpfs that holds a disk limit
// of size bytes. Besides the size, they bound its inodes: an empty file,
// a directory or a symbolic link takes no block but does take kernel
// memory (about a KiB), and tmpfs counts user extended attributes
// against its inodes too, so with the default (half the host's RAM in
// pages) a small limit would hold millions of files or gigabytes of
// xattrs. One inode per page of the limit lets a run hold as many files
// as it could hold one-page files, and keeps what inodes and xattrs take
// to a fraction of the limit.
func TmpfsOptions(size int64) string {
	return "size=" + strconv.FormatInt(size, 10) + ",nr_inodes=" + strconv.FormatInt(TmpfsInodes(size), 10)
}

// DiskFull tells from the free space left on a disk limit's tmpfs of
// size bytes whether a write was, or would have been, refused.
func DiskFull(free, size int64) bool {
	return free < max(64<<10, size/100)
}

// InodesFull tells, likewise, from the free inodes left of files (the
// tmpfs has inodes in proportion to its size: TmpfsOptions) whether a
// file could not be made.
func InodesFull(free, files uint64) bool {
	return files > 0 && free < max(16, files/100)
}

// TmpfsInodes is how many inodes (files, directories, links, the root
// included) the tmpfs of TmpfsOptions(size) holds: what else holds a
// disk limit of size bytes (a copy workspace, package workspace) bounds
// its entries by the same rule.
func TmpfsInodes(size int64) int64 { return max(size/4096, 64) }

// NetMode is the sandbox's network.
type NetMode string

// Network modes.
const (
	// NetNone: a network namespace with only loopback.
	NetNone NetMode = "none"
	// NetProxy: NetNone plus a listener on 127.0.0.1:ProxyPort inside the
	// sandbox, served on the host side by Stdio.ServeProxy (moat's egress
	// proxy). Nothing else leaves the namespace.
	NetProxy NetMode = "proxy"
	// NetHost: the host's network namespace, unfiltered.
	NetHost NetMode = "host"
)

// Network is the network plan of a run.
type Network struct {
	Mode      NetMode `json:"mode"`
	ProxyPort int     `json:"proxy_port,omitempty"`
	// RestrictBind and RestrictConnect limit TCP bind and connect to the
	// ports in BindPorts and ConnectPorts with Landlock (ABI 4 or later;
	// the sandbox package refuses such a Spec on an older kernel). Off,
	// Landlock leaves TCP alone.
	RestrictBind    bool  `json:"restrict_bind,omitempty"`
	BindPorts       []int `json:"bind_ports,omitempty"`
	RestrictConnect bool  `json:"restrict_connect,omitempty"`
	ConnectPorts    []int `json:"connect_ports,omitempty"`
	// TUN, in mode NetProxy, adds a TUN device to the namespace with the
	// default route through it; the backend hands its fd to
	// Stdio.ServeTUN. A backend that cannot make it fails the run.
	TUN *TUN `json:"tun,omitempty"`
}

// TUN is a TUN device (IFF_TUN, no packet information; virtio-net headers
// if VnetHdr) in the sandbox's network namespace: up, with an IPv4 address and its subnet, an MTU, and
// the IPv4 default route through it.
type TUN struct {
	Name string       `json:"name"`
	Addr netip.Prefix `json:"addr"`
	MTU  int          `json:"mtu"`
	// VnetHdr makes the device's packets begin with a struct
	// virtio_net_hdr (IFF_VNET_HDR) and offloads checksums to its reader
	// (TUN_F_CSUM): the sandbox's TCP leaves its checksums partial, and
	// packets written with VIRTIO_NET_HDR_F_NEEDS_CSUM are taken as
	// checked. The server of the device (Stdio.ServeTUN) must expect it.
	VnetHdr bool `json:"vnet_hdr,omitempty"`
	// Dir holds the clone device "tun"; empty means /dev/net. Tests
	// point it at a node of their own.
	Dir string `json:"dir,omitempty"`
}

// DevDir is Dir, or /dev/net when it is empty.
func (t *TUN) DevDir() string {
	if t.Dir == "" {
		return "/dev/net"
	}
	return t.Dir
}

// Capabilities is what a backend can enforce on this host for this caller.
// The sandbox package refuses a Spec that asks for more, naming the gap.
type Capabilities struct {
	// Memory, Pids and CPU report whether those limits can be applied;
	// the matching *Why says why not.
	Memory, Pids, CPU          bool
	MemoryWhy, PidsWhy, CPUWhy string
	// Delegation says how this caller could get the cgroups it lacks
	// here (commands with this host's paths), for a refusal to name.
	Delegation string
	// PidsBy names what enforces Pids when it can be: PidsCgroup, or,
	// where no cgroup is available to this caller, PidsRlimit. A Spec
	// whose Limits.PidsRlimit is set asks for the latter.
	PidsBy string
	// LandlockABI is the Landlock ABI the backend applies (0: none).
	// LandlockWhy says why there is none when the kernel's is not the
	// reason (a backend that has no Landlock at all); empty otherwise.
	LandlockABI int
	LandlockWhy string
}

// What enforces a process limit (Capabilities.PidsBy).
const (
	// PidsCgroup: the pids controller of the run's cgroup counts every
	// task in it, init's included; forks past it fail with EAGAIN, and
	// the cgroup counts each refusal.
	PidsCgroup = "cgroup"
	// PidsRlimit: RLIMIT_NPROC, soft and hard, on init and so on the
	// command. Since Linux 5.14 the kernel counts it per user namespace
	// and uid, and the command's uid is alone in the sandbox's own user
	// namespace with init: it counts the tasks (threads too) of this run
	// only, and the command, without CAP_SYS_RESOURCE, cannot raise it.
	// Forks past it fail with EAGAIN, but nothing counts the refusals.
	PidsRlimit = "rlimit"
)

// Stdio is where the command's standard streams go. Nil means /dev/null
// for Stdin and discard for the outputs. When Stdout and Stderr are the
// same writer (==, or both nil), the command's stdout and stderr are one
// pipe, as os/exec makes them, so that what it writes to the two arrives
// in the order written (see OneOutput).
//
// Signals received on Signals are forwarded to the command's process
// group, in order; a Barrier received there is closed once every signal
// before it has been passed on.
//
// Run filters output to a terminal (an Stdout or Stderr that is one, or
// the terminal the command's pty is relayed to): the control sequences by
// which output reaches beyond the screen (the clipboard, file transfers,
// title reports; see internal/termsafe) are dropped, each kind a Denial
// of LayerTerminal in the ExitStatus. A session's processes (Lifecycle)
// write as given: package sandbox filters a session command's output to a
// terminal (Session.Exec, Session.Start), and the client what it writes
// to one (client.TerminalOutput).
//
// A terminal is never handed to the command. When Stdin is a terminal
// (*os.File), the command gets a pseudo-terminal of its own instead, as
// its stdin, as its stdout or stderr where those are terminals too, and as
// its controlling terminal; the backend relays it, counts its output with
// the command's, and restores the terminal's mode before Run returns. It
// calls OnTerminal, if set, just before it puts the terminal in raw mode:
// from then on a signal that ends the caller without Run returning would
// leave the terminal raw, so the caller should handle its signals by then.
//
// ServeProxy is called, for a Spec whose network mode is NetProxy, with the
// listener that 127.0.0.1:ProxyPort inside the sandbox is bound to; it must
// serve connections until the listener is closed, which the backend does
// when the run ends.
//
// ServeTUN is called, for a Spec with Network.TUN, with the device's fd
// (the packets the sandbox routes through it); the callee owns the file
// and must close it when it stops serving; it is called on a goroutine of
// its own, possibly while the command already runs (what the command sends
// waits in the device's queue).
//
// CheckExec, when set, is asked about every program a process of the
// sandbox starts (execve and execveat, the command's own first one
// included) before it starts: nil lets it start, an error makes the call
// fail with EACCES. It must not block: the backend may ask it where it
// answers nothing else meanwhile. An answer that must wait (to ask a
// person) is an *ExecPending, whose Wait the backend calls on a goroutine
// of its own. A backend that cannot ask it about every exec of a Spec
// refuses to run it (an error wrapping ErrNoExecCheck) rather than run
// unchecked.
//
// OnCgroup, when set, is given by Lifecycle.Create the directories of the
// sandbox's cgroup once it is made and before any process of the sandbox
// starts: for a caller that records them, so that whoever cleans up after
// the caller's death can remove the cgroup (cgroup.Reclaim) as Destroy
// would have. An error fails Create. A backend that makes no cgroup for
// the sandbox, or reclaims it itself when its caller dies, does not call
// it; Run does not either.
type Stdio struct {
	Stdin      io.Reader
	Stdout     io.Writer
	Stderr     io.Writer
	Signals    <-chan os.Signal
	ServeProxy func(net.Listener)
	ServeTUN   func(*os.File)
	OnTerminal func()
	CheckExec  func(c ExecCall) error
	OnCgroup   func(dirs []string) error
}

// OneOutput reports whether the command's stdout and stderr share one
// pipe: Stdout and Stderr are the same writer, or both nil. A backend
// copies that pipe to Stdout alone.
func (s *Stdio) OneOutput() bool {
	return SameWriter(s.Stdout, s.Stderr)
}

// SameWriter reports whether a and b are the same writer, as == says;
// false, not a panic, for a type that cannot be compared.
func SameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// ExecPending is what a CheckExec returns when its answer must wait (a
// person is asked): the backend calls Wait, on a goroutine of its own and
// with a ctx that ends with the sandbox, and lets the program start only
// if Wait returns nil.
type ExecPending struct {
	Wait func(ctx context.Context) error
}

func (*ExecPending) Error() string { return "the exec check waits for an answer" }

// ExecCall is a program about to start inside a sandbox, as its execve
// was given it: read from the memory of the process that calls it, so
// only as trustworthy as that process (see Stdio.CheckExec).
type ExecCall struct {
	// Pid identifies the calling process, as the backend sees it: a
	// shell searching its PATH calls execve once per directory, and a
	// checker can tell the retries of one search by it.
	Pid int
	// Path is the program as given (relative to the caller's working
	// directory; "" for an fexecve).
	Path string
	// Dir is the caller's working directory as the sandbox names it, ""
	// when the backend could not read it: what a person asked about the
	// exec is shown, and what an approval of it covers.
	Dir string
	// Argv are its arguments; Truncated says there were more (or longer
	// ones) than the backend reads, and Argv is a prefix of them.
	Argv      []string
	Truncated bool
	// Preload are the words of the environment it is given that load
	// code into the program (LD_PRELOAD=…, LD_AUDIT=…, LD_LIBRARY_PATH=…,
	// GCONV_PATH=…, with a value): code that runs in the program, before
	// or beside its own, and can make it do anything whatever its argv
	// says. A backend that reads no environment leaves it nil.
	Preload []string
	// Resolved is the file the program is, as the backend found it in
	// the caller's view (symbolic links followed, a /proc/self/fd/N or
	// /dev/fd/N name taken to the file the descriptor holds): its path
	// as the host names it, of which only the base name means anything
	// to the rules. "" when it could not be named (a memfd, a deleted
	// file) or the backend does not resolve programs.
	Resolved string
	// Open, when set, opens for reading a regular file as the calling
	// process sees it, while the call waits for the check (not after):
	// path "" is the program itself, however it was named; any other
	// path is found as the caller's execve would find it (in its root,
	// from its working directory, links followed). The file's Name is
	// its path as the host names it, "" when it has none. A checker
	// reads a script's #! line with it, and finds the program a loader
	// or an interpreter is given. An error that is fs.ErrPermission is
	// a file the backend may not read that the sandbox could have made
	// (not one of the host's root): the kernel reads a #! line whatever
	// the read bits, so a checker cannot tell what it runs. nil where
	// the backend cannot open files.
	Open func(path string) (*os.File, error)
	// First says this is the exec that starts the command itself, whose
	// argv is the Spec's: a checker that decided the command line before
	// the run need not decide it again. (A backend may also let that exec
	// through without asking, as the native direct start does.)
	First bool
}

// Barrier, sent on Stdio.Signals, is closed by the backend once it has
// passed on every signal sent before it: moat waits on one before it
// stops itself for Ctrl-Z, so that the command has been told to stop
// first. It is an os.Signal only to travel on that channel.
type Barrier chan struct{}

func (Barrier) String() string { return "barrier" }

// Signal makes Barrier an os.Signal.
func (Barrier) Signal() {}

// Backend runs Specs.
type Backend interface {
	// Name is a short identifier ("native").
	Name() string
	// Capabilities probes what this backend can enforce here.
	Capabilities() Capabilities
	// Run runs the Spec to completion. Cancelling ctx kills everything in
	// the sandbox. It returns an error only when the sandbox could not be
	// set up or the command could not be started (an *InitError carries
	// the stage); a command that ran and failed is an ExitStatus.
	Run(ctx context.Context, spec *Spec, stdio Stdio) (*ExitStatus, error)
}

// Lifecycle is a Backend whose sandboxes live across commands: Create
// builds a sandbox from the Spec's sandbox-level part (root and mounts,
// network, identity, cgroup limits, seccomp, Landlock) and returns it
// running and idle; processes are then started in it one by one.
type Lifecycle interface {
	// Create builds the sandbox. Spec.Args, Env and Dir are not used
	// (each process brings its own, see ProcessSpec); Spec.Limits.Wall
	// and OutputBytes are left to each process too. stdio is used only
	// for ServeProxy, ServeTUN, CheckExec and OnCgroup. ctx bounds the creation
	// only. An error means nothing of the sandbox remains; an *InitError
	// names the stage that failed.
	//
	// With CheckExec set, every program any process of the sandbox starts,
	// for its whole life, is checked: a call is asked of the CheckExec of
	// the Exec whose process tree it came from (a process a command left
	// in the background included, after the command has ended), with
	// First set on the command's own exec; a call that cannot be told to
	// any Exec, or whose Exec has no CheckExec, is asked of Create's. A
	// backend that cannot check them all refuses to create the sandbox
	// (an error wrapping ErrNoExecCheck).
	Create(ctx context.Context, spec *Spec, stdio Stdio) (Instance, error)
}

// Instance is a live sandbox made by Lifecycle.Create. Every process
// started in it gets exactly the restrictions of the sandbox (its user,
// no capabilities, no_new_privs, Landlock, the seccomp filters, the
// rlimits) and a session and process group of its own. Its methods may
// be called concurrently.
type Instance interface {
	// Exec starts a process. It returns once the process runs (or could
	// not be started: an *InitError, with ErrNotFound or ErrNotExecutable
	// as for Run). Cancelling ctx kills the process's process group, as a
	// wall-clock limit does, with Cause killed. Stdio.Signals and
	// OnTerminal are not used: see Process.Signal and ProcessSpec.Tty.
	// A Stdin that is a file (not a terminal) is passed to the process;
	// any other is copied to it until it ends, and a read in progress
	// when the process exits may take input the process never gets.
	Exec(ctx context.Context, p *ProcessSpec, stdio Stdio) (Process, error)
	// Stats reads what the sandbox's cgroup (or, without one, /proc)
	// gives; a counter not available is 0.
	Stats() Stats
	// Destroy kills every process of the sandbox and removes everything
	// it had on the host (processes, mounts, cgroups, temporary files);
	// processes still waited for end with Cause killed. It is idempotent,
	// and safe after the sandbox ended by itself.
	Destroy(ctx context.Context) error
	// Done is closed when the sandbox has ended: destroyed, or its init
	// died. Nothing of it remains on the host by then.
	Done() <-chan struct{}
}

// CPUCounter is an Instance whose CPU time (Stats.CPU) can be read alone,
// more cheaply than the whole of Stats: sessions read it every so often
// while commands run under a CPU budget.
type CPUCounter interface {
	CPUTime() time.Duration
}

// ProcessSpec is one process to start in an Instance.
type ProcessSpec struct {
	// Args, Env and Dir are as in Spec: the command line, its complete
	// environment, and its working directory inside the sandbox.
	Args []string
	Env  []string
	Dir  string
	// Wall and Output limit this process: past either, the backend kills
	// its process group (Cause timeout or output). Zero means no limit.
	Wall   time.Duration
	Output int64
	// Tty gives the process a pseudo-terminal, Rows by Cols, as its stdin,
	// stdout, stderr and controlling terminal; the backend relays
	// Stdio.Stdin to it and its output to Stdio.Stdout (Stderr is unused).
	Tty        bool
	Rows, Cols uint16
}

// Process is a process started by Instance.Exec.
type Process interface {
	// Wait waits for the process to exit and returns how it ended, with
	// the causes of Run; the limits of this process and the sandbox's
	// cgroup limits are reported. Processes it left in the background
	// keep running in the sandbox. Wait may be called more than once.
	Wait() (*ExitStatus, error)
	// Signal sends sig to the process's process group. After the
	// process has exited it returns os.ErrProcessDone.
	Signal(sig os.Signal) error
	// Resize changes the size of the process's terminal (Tty only).
	Resize(rows, cols uint16) error
}

// Stats is what a live sandbox uses now. A counter not available is 0.
type Stats struct {
	CPU           time.Duration // user+system time of the sandbox's processes so far
	MemoryBytes   int64         // memory in use now
	MemoryPeak    int64         // the most memory in use at once
	Pids          int64         // tasks alive now
	PidsLimitHits int64         // forks refused by the process limit
	OOMKills      int64         // processes killed by the memory limit
}

// Cause is why a run ended.
type Cause string

// Causes. A backend reports the most specific one it saw.
const (
	CauseExit    Cause = "exit"      // the command exited by itself
	CauseSignal  Cause = "signal"    // the command died of a signal not caused by a limit
	CauseTimeout Cause = "timeout"   // the wall-clock limit fired
	CauseCPU     Cause = "cpu"       // the CPU-time limit fired (SIGXCPU)
	CauseMemory  Cause = "memory"    // the memory limit fired (OOM kill)
	CausePids    Cause = "pids"      // the command died after forks were refused
	CauseOutput  Cause = "output"    // the output limit fired
	CauseFile    Cause = "file_size" // the file-size limit fired (SIGXFSZ)
	CauseDisk    Cause = "disk"      // the command failed after the disk limit was reached
	CauseKilled  Cause = "killed"    // the run was cancelled or killed from outside
	// CauseProtection: a protection the sandbox was built with (a
	// read-only path or a deny mask in a tree the host shares) went
	// while it ran, the host having replaced or removed the file under
	// it; a Denial of LayerMount names the path.
	CauseProtection Cause = "protection"
)

// ExitStatus is how a run ended, as seen by the backend.
type ExitStatus struct {
	// ExitCode is the command's exit code, or -1 when it died of a signal.
	ExitCode int
	// Signal is the signal number that killed the command, 0 if none.
	Signal int
	// Cause is why the run ended; LimitsHit lists every limit reached
	// during the run, even ones the command survived.
	Cause     Cause
	LimitsHit []Cause
	// Wall is the time from start to end; CPU is user+system time of the
	// sandbox's processes; MaxMemory is peak memory in bytes (cgroup peak
	// when available, else the largest process's resident set).
	Wall      time.Duration
	CPU       time.Duration
	MaxMemory int64
	// OutputBytes is how many bytes of the command's stdout and stderr
	// were passed on: past an output limit, the limit (see Delivered).
	OutputBytes int64
	// Setup is the part of Wall before the host learnt that the command
	// had been started (exec'd inside the sandbox); zero if it never was.
	Setup time.Duration
	// LandlockABI is the Landlock ABI the backend applied (0: none).
	LandlockABI int
	// Denials are the refusals the backend saw, one entry per kind.
	Denials []Denial
}

// LayerMount is the Layer of the Denial that names a protection that went
// while the sandbox ran (CauseProtection).
const LayerMount = "mount"

// ProtectionLost is the Denial for a protection that went: its path.
func ProtectionLost(path string) Denial {
	return Denial{Layer: LayerMount, What: path, Count: 1,
		Rule: "the host replaced or removed this protected path while the sandbox ran, and its protection in the sandbox went with it",
		Hint: "review the file: the command may have written the new one in the moment before it was stopped; a new sandbox protects it (a file saved by renaming a new one over it, as git config, sed -i and editors do, does this)"}
}

// LayerTerminal is the Layer of the Denials for control sequences dropped
// from the command's output to a terminal (see Stdio).
const LayerTerminal = "terminal"

// TerminalDenials are the Denials for what a filter of output to a
// terminal dropped, one per kind.
func TerminalDenials(drops []termsafe.Drop) []Denial {
	var out []Denial
	for _, d := range drops {
		out = append(out, Denial{Layer: LayerTerminal, What: d.What, Count: d.Count,
			Rule: termsafe.Rule})
	}
	return out
}

// Denial is something the sandbox refused the command, seen as it
// happened, with what to change to allow it.
type Denial struct {
	Layer   string `json:"layer"`   // "seccomp"
	What    string `json:"what"`    // the system call
	Errno   string `json:"errno"`   // what the command got, e.g. "EPERM"
	Count   int    `json:"count"`   // how many times
	Rule    string `json:"rule"`    // why the profile refuses it
	Profile string `json:"profile"` // the profile that refused it (set by the sandbox package)
	Hint    string `json:"hint"`    // how to allow it (set by the sandbox package)
	// Fallback, when set, says the refusal was expected: ENOSYS for a
	// call that programs replace with an older one when the kernel lacks
	// it (clone3, which libc then does with clone), and what they do
	// instead. Such a denial stays in the report but is not one a person
	// must act on. Set by the sandbox package.
	Fallback string `json:"fallback,omitempty"`
}

// InitError is a failure while setting up the sandbox, reported by the
// stage that failed (e.g. "mount /usr", "pivot_root", "exec").
type InitError struct {
	Stage string
	Err   error
	// Errno is the raw errno when the failure was a system call, else 0.
	Errno int
}

func (e *InitError) Error() string { return e.Stage + ": " + e.Err.Error() }
func (e *InitError) Unwrap() error { return e.Err }

// GoneError is a path that a mount which is not Optional needs, missing
// when the backend makes the mount. The Spec was made from a host that
// had it (the sandbox package refuses a missing deny or read-only path the
// command could create), so it was removed since: skipping the mount
// would leave the path for the command to create and use, unprotected.
// It matches ENOENT and fs.ErrNotExist with errors.Is.
type GoneError struct {
	Path string // the path in the sandbox
}

func (e *GoneError) Error() string {
	return e.Path + " disappeared after the run was checked (removed on the host?); the sandbox does not start without it"
}
func (e *GoneError) Unwrap() error { return syscall.ENOENT }

// Errors callers branch on.
var (
	// ErrNotFound: the command does not exist inside the sandbox (exit 127).
	ErrNotFound = errors.New("command not found")
	// ErrNotExecutable: the command exists but cannot be executed (126).
	ErrNotExecutable = errors.New("command not executable")
	// ErrNoExecCheck: Stdio.CheckExec was set, and this backend cannot
	// check every program this Spec's processes would start.
	ErrNoExecCheck = errors.New("the programs started inside the sandbox cannot be checked")
	// ErrNoCPUCount: Spec.CountCPU was set, and this backend cannot count
	// the CPU time of every process of the sandbox here.
	ErrNoCPUCount = errors.New("the CPU time of every process of the sandbox cannot be counted")
)

// Delivered is what n bytes read from a command's output come to once an
// output limit (0 for none) cut them: the bytes passed on. How much past
// the limit was read before the command was stopped depends on how the
// backend reads (a pipe's chunks, gVisor's writes), so that is not said.
func Delivered(n, limit int64) int64 {
	if limit > 0 && n > limit {
		return limit
	}
	return n
}
