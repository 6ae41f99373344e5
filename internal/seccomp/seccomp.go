package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
)

// Action is what the kernel does with a system call that a rule (or the
// default) decides. The zero Action is invalid, so a rule without one is an
// error rather than a silent kill.
type Action uint8

const (
	Allow       Action = iota + 1 // run the system call
	Errno                         // fail it with the rule's errno (EPERM when zero)
	KillProcess                   // kill the whole process (SECCOMP_RET_KILL_PROCESS)
	KillThread                    // kill the calling thread (SECCOMP_RET_KILL_THREAD)
	Trap                          // send SIGSYS to the thread (SECCOMP_RET_TRAP)
	Log                           // run the system call and log it (SECCOMP_RET_LOG)
)

var actionNames = [...]string{Allow: "allow", Errno: "errno", KillProcess: "kill-process", KillThread: "kill-thread", Trap: "trap", Log: "log"}

func (a Action) String() string {
	if a.valid() {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

func (a Action) valid() bool { return a >= Allow && a <= Log }

// Return values of a seccomp filter (linux/seccomp.h), kept here so that the
// compiler builds on every platform.
const (
	retKillProcess = 0x80000000
	retKillThread  = 0x00000000
	retTrap        = 0x00030000
	retErrno       = 0x00050000
	retLog         = 0x7ffc0000
	retAllow       = 0x7fff0000
	retData        = 0x0000ffff

	eperm    = 1
	maxErrno = 4095 // MAX_ERRNO: larger values are not errors to user space
)

// ret is the filter return value of a, with errno for Errno (0 means EPERM).
func (a Action) ret(errno uint32) uint32 {
	switch a {
	case Allow:
		return retAllow
	case Errno:
		if errno == 0 {
			errno = eperm
		}
		return retErrno | errno&retData
	case KillProcess:
		return retKillProcess
	case KillThread:
		return retKillThread
	case Trap:
		return retTrap
	case Log:
		return retLog
	}
	panic("seccomp: invalid action " + a.String())
}

// Op compares a system-call argument with Arg.Value. The values follow
// libseccomp's SCMP_CMP_* (and so Docker's); the zero Op is invalid.
type Op uint8

const (
	NE       Op = iota + 1 // arg != Value
	LT                     // arg < Value (unsigned)
	LE                     // arg <= Value (unsigned)
	EQ                     // arg == Value
	GE                     // arg >= Value (unsigned)
	GT                     // arg > Value (unsigned)
	MaskedEQ               // arg & Value == ValueTwo
)

var opNames = [...]string{NE: "NE", LT: "LT", LE: "LE", EQ: "EQ", GE: "GE", GT: "GT", MaskedEQ: "MASKED_EQ"}

func (o Op) String() string {
	if o >= NE && o <= MaskedEQ {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Arg is a condition on one system-call argument. Arguments are compared as
// unsigned 64-bit values, as the kernel passes them in struct seccomp_data.
// For an argument the kernel reads as a 32-bit int, use MaskedEQ with a mask of
// 0xffffffff: the caller controls the upper half of the register and the
// kernel ignores it, so a full 64-bit EQ could be evaded.
type Arg struct {
	Index    uint // 0 to 5
	Value    uint64
	ValueTwo uint64 // only for MaskedEQ
	Op       Op
}

// Rule applies Action to the named system calls when all of its Args match.
// Several rules naming the same system call are tried in profile order, and
// the first that matches decides; if none does, the profile's default applies.
type Rule struct {
	Names   []string
	Action  Action
	Errno   uint32 // for Action Errno; zero means EPERM
	Args    []Arg
	Comment string // why the rule exists, one line
}

// Profile is a system-call filter as data. The zero Profile is invalid: it has
// no DefaultAction.
type Profile struct {
	DefaultAction Action
	DefaultErrno  uint32 // for DefaultAction Errno; zero means EPERM

	// Arches lists the architectures the profile accepts ("x86_64",
	// "aarch64"); empty means both. A compiled program kills the process for
	// a system call of any other architecture, including the x32 ABI.
	Arches []string

	Rules []Rule
}

// Architectures Compile supports.
const (
	ArchX86_64  = "x86_64"
	ArchAarch64 = "aarch64"
)

// Audit architecture values (linux/audit.h) and the x32 syscall bit.
const (
	auditArchX86_64  = 0xc000003e
	auditArchAarch64 = 0xc00000b7
	x32SyscallBit    = 0x40000000
)

// ErrUnknownSyscall is wrapped by the errors of Compile for a system-call name
// that no Linux architecture has.
var ErrUnknownSyscall = errors.New("unknown system call")

// NativeArch returns the seccomp architecture name of the running program, or
// "" if Compile does not support it.
func NativeArch() string {
	switch runtime.GOARCH {
	case "amd64":
		return ArchX86_64
	case "arm64":
		return ArchAarch64
	}
	return ""
}

func table(arch string) map[string]int {
	switch arch {
	case ArchX86_64:
		return sysnumX86_64()
	case ArchAarch64:
		return sysnumAarch64()
	}
	return nil
}

// Lookup returns the number of the named system call on arch.
func Lookup(arch, name string) (int, bool) {
	nr, ok := table(arch)[name]
	return nr, ok
}

// Name returns the name of system call nr on arch, for reports.
func Name(arch string, nr int) (string, bool) {
	for name, n := range table(arch) {
		if n == nr {
			return name, true
		}
	}
	return "", false
}

// Validate reports every problem of p at once, for any architecture.
func (p *Profile) Validate() error {
	if p == nil {
		return errors.New("seccomp: nil profile")
	}
	var errs []error
	if !p.DefaultAction.valid() {
		errs = append(errs, fmt.Errorf("default action: invalid %v", p.DefaultAction))
	}
	if p.DefaultErrno > maxErrno {
		errs = append(errs, fmt.Errorf("default errno %d: above %d", p.DefaultErrno, maxErrno))
	}
	for _, a := range p.Arches {
		if table(a) == nil {
			errs = append(errs, fmt.Errorf("architecture %q: not supported (want %s or %s)", a, ArchX86_64, ArchAarch64))
		}
	}
	for i, r := range p.Rules {
		if err := r.validate(); err != nil {
			errs = append(errs, fmt.Errorf("rule %d %v: %w", i, r.Names, err))
		}
	}
	return errors.Join(errs...)
}

func (r *Rule) validate() error {
	var errs []error
	if len(r.Names) == 0 {
		errs = append(errs, errors.New("no system call names"))
	}
	for _, n := range r.Names {
		_, x := sysnumX86_64()[n]
		_, a := sysnumAarch64()[n]
		if !x && !a && !otherArchNames()[n] {
			errs = append(errs, fmt.Errorf("%w %q", ErrUnknownSyscall, n))
		}
	}
	if !r.Action.valid() {
		errs = append(errs, fmt.Errorf("invalid action %v", r.Action))
	}
	if r.Errno > maxErrno {
		errs = append(errs, fmt.Errorf("errno %d: above %d", r.Errno, maxErrno))
	}
	for j, a := range r.Args {
		if a.Index > 5 {
			errs = append(errs, fmt.Errorf("arg %d: index %d above 5", j, a.Index))
		}
		if a.Op < NE || a.Op > MaskedEQ {
			errs = append(errs, fmt.Errorf("arg %d: invalid operator %v", j, a.Op))
		}
	}
	return errors.Join(errs...)
}

// maxInstructions is BPF_MAXINSNS, the kernel's limit on a program's length.
const maxInstructions = 4096

// Compile returns the BPF program of p for arch ("x86_64" or "aarch64").
// It fails if p is invalid, names a system call that no Linux architecture
// has, or does not list arch in Arches. Names that exist on other
// architectures only (chmod on aarch64, _llseek on i386) are skipped.
// The built-in profiles' programs are generated at build time, and
// returned as stored (see precompiled.go).
func Compile(p *Profile, arch string) ([]Instruction, error) {
	if p != nil {
		if prog := precompiled(p, arch); prog != nil {
			return prog, nil
		}
	}
	return compile(p, arch)
}

// compile is Compile without the stored programs.
func compile(p *Profile, arch string) ([]Instruction, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	var audit uint32
	switch arch {
	case ArchX86_64:
		audit = auditArchX86_64
	case ArchAarch64:
		audit = auditArchAarch64
	default:
		return nil, fmt.Errorf("seccomp: architecture %q not supported", arch)
	}
	if len(p.Arches) > 0 && !contains(p.Arches, arch) {
		return nil, fmt.Errorf("seccomp: profile does not allow architecture %s (it lists %v)", arch, p.Arches)
	}

	// Group the rules by system-call number, keeping profile order.
	nums := table(arch)
	byNr := map[int][]Rule{}
	for _, r := range p.Rules {
		for _, name := range r.Names {
			if nr, ok := nums[name]; ok {
				byNr[nr] = append(byNr[nr], r)
			}
		}
	}
	defaultRet := p.DefaultAction.ret(p.DefaultErrno)

	var c compiler
	kill := c.newLabel()
	c.ldAbs(offArch)
	next := c.newLabel()
	c.jump(jeq, audit, next, kill)
	c.label(next)
	c.ldAbs(offNr)
	if arch == ArchX86_64 {
		// x32 system calls share the x86_64 audit arch and are told apart
		// by this bit; their numbers differ, so no rule here would apply.
		next = c.newLabel()
		c.jump(jset, x32SyscallBit, kill, next)
		c.label(next)
	}
	c.search(intervals(byNr, defaultRet))
	c.label(kill)
	c.ret(retKillProcess)
	prog, err := c.assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	if len(prog) > maxInstructions {
		return nil, fmt.Errorf("seccomp: program has %d instructions, above the kernel's limit of %d", len(prog), maxInstructions)
	}
	return prog, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// leaf is the decision for one system call: its rules then the default, or
// only the default. Build it with newLeaf, which computes its key once: the
// search compares keys of neighbouring numbers many times.
type leaf struct {
	rules      []Rule
	defaultRet uint32
	k          string
}

func newLeaf(rules []Rule, defaultRet uint32) leaf {
	b := make([]byte, 0, 32)
	b = strconv.AppendUint(b, uint64(defaultRet), 16)
	for _, r := range rules {
		b = append(b, '|')
		b = strconv.AppendUint(b, uint64(r.Action.ret(r.Errno)), 16)
		for _, a := range r.Args {
			b = append(b, ' ')
			b = strconv.AppendUint(b, uint64(a.Index), 10)
			b = append(b, ',')
			b = strconv.AppendUint(b, uint64(a.Op), 10)
			b = append(b, ',')
			b = strconv.AppendUint(b, a.Value, 16)
			b = append(b, ',')
			b = strconv.AppendUint(b, a.ValueTwo, 16)
		}
		if len(r.Args) == 0 {
			break // later rules are unreachable
		}
	}
	return leaf{rules: rules, defaultRet: defaultRet, k: string(b)}
}

// key identifies leaves that compile to the same code, so that they can share
// it and neighbouring numbers can share an interval of the search.
func (l leaf) key() string { return l.k }

// interval is a run of system-call numbers, from start up to the next
// interval's start, that share one leaf.
type interval struct {
	start uint32
	leaf  leaf
}

// intervals splits the 32-bit number space into maximal runs of equal leaves.
func intervals(byNr map[int][]Rule, defaultRet uint32) []interval {
	nrs := make([]int, 0, len(byNr))
	for nr := range byNr {
		nrs = append(nrs, nr)
	}
	sort.Ints(nrs)
	gap := newLeaf(nil, defaultRet)
	out := []interval{{start: 0, leaf: gap}}
	add := func(start uint32, l leaf) {
		if last := out[len(out)-1]; last.leaf.key() == l.key() {
			return
		}
		if last := &out[len(out)-1]; last.start == start {
			last.leaf = l
			if len(out) > 1 && out[len(out)-2].leaf.key() == l.key() {
				out = out[:len(out)-1]
			}
			return
		}
		out = append(out, interval{start: start, leaf: l})
	}
	for _, nr := range nrs {
		add(uint32(nr), newLeaf(byNr[nr], defaultRet))
		add(uint32(nr)+1, gap)
	}
	return out
}
