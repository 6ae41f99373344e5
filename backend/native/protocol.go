package native

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/seccomp"
)

// The host side and the init stage talk over two pipes that init inherits
// as fds 3 and 4 (after stdin, stdout and stderr); a third, fd 5, carries
// what init's Go runtime would print on its stderr (fdCrash). (The direct start uses
// the same two pipes, with the plan in memory instead of the Spec on the
// first and fixed-size records on the second; see direct_linux.go.)
//
//	host                                   init (PID 1 in the new namespaces)
//	 |  open trees, start init (clone with   |
//	 |  namespaces but the network one,      |
//	 |  uid/gid maps written by the runtime) |  Go runtime starts; a thread
//	 |                                       |  makes the network namespace
//	 |  join cgroups (v1), id-map the trees, |
//	 |  compile the seccomp filters          |
//	 |--- fd 3: the Spec, one frame -------->|  read it: the go-ahead
//	 |                                       |  build root, pivot_root, limits,
//	 |                                       |  drop caps, no_new_privs, exec
//	 |<-- fd 4: "started" -------------------|  the command is running
//	 |    ...                                |  reap, forward signals
//	 |<-- fd 4: "exit", status, usage -------|  the command ended; init exits
//	 |                                       |  and the kernel kills what is left
//	 |--- fd 3: 's', a signal number ------->|  forwarded to the command's
//	 |                                       |  process group
//	 |--- fd 3: 'k' (Control runs) --------->|  stop: kill the command, save,
//	 |                                       |  report "exit" as usual
//	 or, at any point before "started":
//	 |<-- fd 4: "error", stage, errno -------|  setup failed; init exits 1
//
// Sending the Spec only after the host has put init into its cgroups means
// nothing the command does can happen outside them. The Spec and each
// message are one frame (see codec.go). When init dies without an "exit"
// message (killed by the host for a limit, or by the kernel), the host
// decides the cause.

const (
	fdSpec   = 3 // host -> init: the Spec, then control bytes
	fdStatus = 4 // init -> host: messages
	// fdCrash becomes init's own stderr, read by the host: whatever the
	// Go runtime prints when it dies (a fatal error, a crash dump) goes
	// there, and the host reports it as init's failure, instead of
	// reaching the command's stderr. The command gets the stderr init
	// was started with.
	fdCrash = 5
)

// Control bytes on fdSpec after the Spec.
const (
	ctlSignal = 's' // followed by one byte, a signal number to forward
	ctlStop   = 'k' // Control runs: stop everything but init
)

// initArg0 is argv[0] of the re-executed binary in the init stage.
const initArg0 = "moat-sandbox-init"

// argNetNS, as argv[1] of init, asks for a network namespace of its own.
const argNetNS = "netns"

// maxText bounds a message's text (boundedText).
const maxText = 4096

// boundedText is s cut to maxText bytes on a character's boundary, saying
// how much it left out.
func boundedText(s string) string {
	if len(s) <= maxText {
		return s
	}
	cut := maxText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "... (" + strconv.Itoa(len(s)-cut) + " bytes more)"
}

type message struct {
	Type string // started | error | exit; in a session also ready | closed

	// ID is the exec request a session's message answers.
	ID uint64

	// error. Gone, when set, is the path of a backend.GoneError.
	Stage string
	Err   string
	Errno int
	Gone  string

	// started
	Pid int

	// exit: the command's raw wait status and the resource usage of every
	// process init reaped.
	WaitStatus uint32
	UserNanos  int64
	SysNanos   int64
	MaxRSSKiB  int64
	// DiskFull: the disk-limit tmpfs ran out of space. MergeErr: the run's
	// overlay changes could not be merged into the change set.
	DiskFull bool
	MergeErr string
	// Denials are the system calls the observed seccomp filter refused.
	Denials []denial
}

type denial struct {
	Nr    int
	Errno int
	Count int
}

// initSpec is what the host sends to init: the Spec plus the host side's
// decisions about how to realise it.
type initSpec struct {
	Spec *backend.Spec
	// Trees maps a mount index to an inherited fd holding a detached mount
	// tree (open_tree) the host prepared; init moves it into place instead
	// of binding by path.
	// Keys are the mount's index, and "INDEX/layers" for the layers of
	// an overlay.
	Trees map[string]int
	// Filters are the Spec's seccomp profiles compiled on the host for
	// this machine's architecture, installed by init in this order.
	// Each is the raw program (8 bytes per instruction, as the kernel
	// takes it).
	Filters [][]byte
	// NetFD is an inherited unix socket on which init sends the host the
	// proxy listener it bound inside the network namespace (SCM_RIGHTS),
	// for NetProxy runs; 0 otherwise.
	NetFD int
	// Control: a ctlStop byte on the spec pipe asks init to stop the
	// command (everything in the PID namespace) and still finish the run:
	// merge an overlay's changes and report. Used when there is something
	// to save; otherwise the host kills init.
	Control bool
	// TimerSlack is the timer slack moat started with (rt0.Slack), which
	// init sets on the thread that forks the command; 0 leaves it alone.
	TimerSlack uint64
	// Terminal: the command's stdin is a pty (see terminal), which init
	// makes its controlling terminal.
	Terminal bool
	// SessionFD, when not 0, is an inherited unix socket (SOCK_SEQPACKET)
	// on which init, once restricted, takes exec requests instead of
	// running Spec.Args (see session.go); 0 for a one-shot run.
	SessionFD int
	// ExecFD, when not 0, is an inherited unix socket on which init sends
	// the host the listener of its first filter, installed to check each
	// exec (Stdio.CheckExec): the host, not init, then answers its
	// notifications (see execcheck_linux.go).
	ExecFD int
	// SetsidOnly: the listener sent on ExecFD notifies each setsid but no
	// exec (a session whose execs are not checked; see sessionkill_linux.go).
	SetsidOnly bool
	// Listen: the listener sent on ExecFD also notifies each listen, which
	// the host makes itself unless it would pick a port the TCP bind rule
	// never saw (see listenChecked); ListenOnly: ExecFD is there for that
	// alone, and notifies neither exec nor setsid.
	Listen, ListenOnly bool
}

// usernsArg0 is argv[0] of a process started only to hold a user namespace
// for an idmapped mount; MaybeInit makes it wait to be killed.
const usernsArg0 = "moat-userns-holder"

// encodeFilter and decodeFilter move a BPF program across the pipe.
func encodeFilter(prog []seccomp.Instruction) []byte {
	b := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		b = binary.LittleEndian.AppendUint16(b, in.Code)
		b = append(b, in.Jt, in.Jf)
		b = binary.LittleEndian.AppendUint32(b, in.K)
	}
	return b
}

func decodeFilter(b []byte) ([]seccomp.Instruction, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("seccomp program of %d bytes is not whole instructions", len(b))
	}
	prog := make([]seccomp.Instruction, len(b)/8)
	for i := range prog {
		r := b[8*i:]
		prog[i] = seccomp.Instruction{Code: binary.LittleEndian.Uint16(r), Jt: r[2], Jf: r[3], K: binary.LittleEndian.Uint32(r[4:])}
	}
	return prog, nil
}
