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

// RuleFor returns the comment of the first rule of p naming the system
// call, for explaining a refusal ("" when none does).
func RuleFor(p *Profile, name string) string {
	for _, r := range p.Rules {
		for _, n := range r.Names {
			if n == name {
				return r.Comment
			}
		}
	}
	return ""
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
func WithExecNotify(prog []Instruction, arch string) []Instruction {
	execve, _ := Lookup(arch, "execve")
	execveat, _ := Lookup(arch, "execveat")
	head := []Instruction{
		{Code: ldAbsW, K: 4}, // seccomp_data.arch
		{Code: jeq, Jt: 0, Jf: 5, K: AuditArch(arch)},
		{Code: ldAbsW, K: 0}, // seccomp_data.nr
		{Code: jeq, Jt: 2, Jf: 0, K: uint32(execve)},
		{Code: jeq, Jt: 1, Jf: 0, K: uint32(execveat)},
		{Code: ja, K: 1},
		{Code: retK, K: retUserNotif},
	}
	return append(head, prog...)
}

// IsExec reports whether nr is execve or execveat on arch.
func IsExec(arch string, nr int) bool {
	execve, _ := Lookup(arch, "execve")
	execveat, _ := Lookup(arch, "execveat")
	return nr == execve || nr == execveat
}

// PassThrough is a program that allows every call: with WithExecNotify,
// the filter of a run without a profile whose execs are checked.
func PassThrough() []Instruction { return []Instruction{{Code: retK, K: retAllow}} }
