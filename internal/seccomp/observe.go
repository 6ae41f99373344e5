package seccomp

// Observing denials. A filter refuses a call silently: the program sees
// EPERM and the person running it sees a failure with no cause. To explain
// refusals, the sandbox's init installs its main filter in an observed
// form: every errno result becomes SECCOMP_RET_USER_NOTIF, the kernel
// hands each such call to init (the supervisor) on a listener fd, and init
// answers with the errno the original program gives for that call (the
// same interpreter the tests use), recording the call for the report. The
// command sees exactly the result it would have seen; only refused calls
// take the detour. Kills, traps and other results are left as they are.

import (
	"slices"
	"strings"
)

const retUserNotif = 0x7fc00000

// The listener's ioctls (_IOWR('!', 0, struct seccomp_notif) and
// _IOWR('!', 1, struct seccomp_notif_resp)), the same on x86_64 and aarch64.
const (
	ioctlNotifRecv = 0xc0502100
	ioctlNotifSend = 0xc0182101
)

// Observed returns a copy of prog in which every errno result is replaced
// by SECCOMP_RET_USER_NOTIF.
func Observed(prog []Instruction) []Instruction {
	out := make([]Instruction, len(prog))
	copy(out, prog)
	for i, in := range out {
		if in.Code == retK && in.K&^retData == retErrno {
			out[i].K = retUserNotif
		}
	}
	return out
}

// Allows reports whether a filter's result lets the call through (allow,
// or log, which allows and logs).
func Allows(ret uint32) bool {
	a := ret &^ retData
	return a == retAllow || a == retLog
}

// Evaluate runs prog over one system call as the kernel would, and returns
// the filter's result: for a refusal, ErrnoOf gives the errno.
func Evaluate(prog []Instruction, nr int32, arch uint32, ip uint64, args [6]uint64) (uint32, error) {
	ret, _, err := run(prog, data{nr: uint32(nr), arch: arch, ip: ip, args: args})
	return ret, err
}

// ErrnoOf is the errno of an errno result, and whether ret is one.
func ErrnoOf(ret uint32) (int, bool) {
	if ret&^retData != retErrno {
		return 0, false
	}
	return int(ret & retData), true
}

// AuditArch is the AUDIT_ARCH value of arch ("x86_64", "aarch64"), as it
// appears in seccomp_data.
func AuditArch(arch string) uint32 { return auditArch(arch) }

// RuleFor explains a refusal of the system call name with errno under p:
// the comment of the rule that refuses it so. A refusal is recorded
// without its arguments, so where rules told apart by arguments (clone's
// namespace flags, socket's families), or those and the default action,
// could each have refused it, the explanation names them all, the
// default's as "not in the profile's allow-list". "" when nothing in p
// refuses the call with errno.
func RuleFor(p *Profile, name string, errno int) string {
	var why []string
	add := func(c string) {
		if c != "" && !slices.Contains(why, c) {
			why = append(why, c)
		}
	}
	refuses := func(a Action, e uint32) bool {
		return a == Errno && int(a.ret(e)&retData) == errno
	}
	decided := false
	for _, r := range p.Rules {
		if !slices.Contains(r.Names, name) {
			continue
		}
		if refuses(r.Action, r.Errno) {
			add(r.Comment)
		}
		if len(r.Args) == 0 {
			// It decides every call the rules before it left.
			decided = true
			break
		}
	}
	if !decided && refuses(p.DefaultAction, p.DefaultErrno) {
		add("not in the profile's allow-list")
	}
	return strings.Join(why, "; or ")
}

// SupervisorAllowed reports whether prog lets a supervisor thread, which
// runs under the filter too, receive and answer notifications: if it
// refused those ioctls, the supervisor would wait on itself forever.
func SupervisorAllowed(prog []Instruction, arch string) bool {
	nr, ok := Lookup(arch, "ioctl")
	if !ok {
		return false
	}
	for _, cmd := range []uint64{ioctlNotifRecv, ioctlNotifSend} {
		ret, err := Evaluate(prog, int32(nr), AuditArch(arch), 0, [6]uint64{0, cmd})
		if err != nil || ret&^retData != retAllow {
			return false
		}
	}
	return true
}

// WithExecNotify returns prog preceded by a check that sends every execve
// and execveat of arch to the supervisor (SECCOMP_RET_USER_NOTIF), which
// evaluates prog for them itself and, where prog allows the call, asks a
// [Supervisor]'s Exec whether the program may start. A call of another
// architecture falls through to prog, which kills it. prog should be the
// observed program (see Observed): a process has one listener, and this
// check shares it.
//
// first, when set, lets one execve through to prog unsent: the one whose
// argv and envp are exactly first's addresses (see FirstExec).
func WithExecNotify(prog []Instruction, arch string, first *FirstExec) []Instruction {
	execve, execveat := execNumbers(arch)
	// Jumps are relative and forward: each is written once the place of
	// its target (notify, then prog) is known.
	head := []Instruction{
		{Code: ldAbsW, K: 4}, // seccomp_data.arch
		{Code: jeq, K: AuditArch(arch)},
		{Code: ldAbsW, K: 0}, // seccomp_data.nr
		{Code: jeq, K: uint32(execveat)},
		{Code: jeq, K: uint32(execve)},
	}
	var toNotify []int // compares whose false branch goes to notify
	if first != nil {
		// seccomp_data.args[i] is at 16+8i, its low half first (both
		// architectures are little-endian).
		for _, w := range []struct {
			off uint32
			v   uint64
		}{{24, first.Argv}, {28, first.Argv >> 32}, {32, first.Envp}, {36, first.Envp >> 32}} {
			head = append(head, Instruction{Code: ldAbsW, K: w.off}, Instruction{Code: jeq, K: uint32(w.v)})
			toNotify = append(toNotify, len(head)-1)
		}
	}
	notify := len(head)
	head = append(head, Instruction{Code: retK, K: retUserNotif})
	orig := len(head)
	rel := func(from, to int) uint8 { return uint8(to - from - 1) }
	head[1].Jf = rel(1, orig)
	head[3].Jt = rel(3, notify)
	head[4].Jf = rel(4, orig)
	if first == nil {
		head[4].Jt = rel(4, notify)
	}
	for i, at := range toNotify {
		head[at].Jf = rel(at, notify)
		if i == len(toNotify)-1 {
			head[at].Jt = rel(at, orig)
		}
	}
	return append(head, prog...)
}

// FirstExec names the execve that starts a sandbox's command, whose
// command line was decided before the run: the addresses of its argv and
// envp arrays, in memory the sandbox cannot read, at a place the host's
// address-space randomisation chose. A process that wanted its own execve
// let through unchecked would have to guess both addresses and map them,
// which costs more than the race the exec check already concedes to a
// hostile process (see package doc of harness, and docs/security.md).
type FirstExec struct{ Argv, Envp uint64 }

// IsExec reports whether nr is execve or execveat on arch.
func IsExec(arch string, nr int) bool {
	execve, execveat := execNumbers(arch)
	return nr == execve || nr == execveat
}

// execNumbers returns the numbers of execve and execveat on arch (-1 for
// an architecture moat has no table of). They are constants rather than
// Lookups: the first Lookup of a process builds the architecture's table
// of every system call, which a run with the default profile, whose
// program is stored (see precompiled), otherwise never needs. The
// table's generator is the authority (TestExecNumbers).
func execNumbers(arch string) (execve, execveat int) {
	switch arch {
	case ArchX86_64:
		return 59, 322
	case ArchAarch64:
		return 221, 281
	}
	return -1, -1
}

// WithSetsidNotify returns prog preceded by a check that sends every
// setsid of arch to the supervisor (SECCOMP_RET_USER_NOTIF), which
// evaluates prog for it itself and, where prog allows it, tells a
// [Supervisor]'s Setsid who is about to lead a session before letting the
// call go on. Every session in a sandbox whose filter has this check was
// made under the supervisor's eyes, which is what lets a session's host
// tell the command a session belongs to exactly, pid reuse included
// (backend/native's sessioncheck). prog should be the observed program,
// as for WithExecNotify; a call of another architecture falls through
// to it.
func WithSetsidNotify(prog []Instruction, arch string) []Instruction {
	return withNotify(prog, arch, setsidNumber(arch))
}

// withNotify returns prog preceded by a check that sends every call nr of
// arch to the supervisor; a call of another architecture, or another
// call, falls through to prog.
func withNotify(prog []Instruction, arch string, nr int) []Instruction {
	head := []Instruction{
		{Code: ldAbsW, K: 4}, // seccomp_data.arch
		{Code: jeq, K: AuditArch(arch), Jf: 3},
		{Code: ldAbsW, K: 0}, // seccomp_data.nr
		{Code: jeq, K: uint32(nr), Jf: 1},
		{Code: retK, K: retUserNotif},
	}
	return append(head, prog...)
}

// IsSetsid reports whether nr is setsid on arch.
func IsSetsid(arch string, nr int) bool { return nr == setsidNumber(arch) }

// setsidNumber is setsid's number on arch (-1 for an architecture moat
// has no table of): a constant, as execNumbers' are, and checked against
// the table the same way.
func setsidNumber(arch string) int {
	switch arch {
	case ArchX86_64:
		return 112
	case ArchAarch64:
		return 157
	}
	return -1
}

// WithListenNotify returns prog preceded by a check that sends every
// listen of arch to the supervisor, which, where prog allows it, makes the
// call itself on the caller's socket unless it is a TCP socket bound to no
// port (Supervisor.Serve): the kernel would bind that one to an ephemeral
// port, which Landlock's TCP bind rule never sees (it has no hook on
// listen). prog should be the observed program, as for WithExecNotify; a
// call of another architecture falls through to it. Without a listener
// on the filter, every listen fails (ENOSYS): closed, not open.
func WithListenNotify(prog []Instruction, arch string) []Instruction {
	return withNotify(prog, arch, listenNumber(arch))
}

// IsListen reports whether nr is listen on arch.
func IsListen(arch string, nr int) bool { return nr == listenNumber(arch) }

// listenNumber is listen's number on arch (-1 for an architecture moat
// has no table of), checked against the table as setsid's is.
func listenNumber(arch string) int {
	switch arch {
	case ArchX86_64:
		return 50
	case ArchAarch64:
		return 201
	}
	return -1
}

// PassThrough is a program that allows every call: with WithExecNotify,
// the filter of a run without a profile whose execs are checked.
func PassThrough() []Instruction { return []Instruction{{Code: retK, K: retAllow}} }
