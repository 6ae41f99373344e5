package seccomp

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Summary is what a profile does on one architecture, for people.
type Summary struct {
	Arch    string
	Default string // the default decision: "allow", "errno EPERM", ...

	// The architecture's system calls, counted by the decision they get
	// when none of their argument rules matches.
	Total   int
	Allowed int
	Denied  map[string]int // by errno name ("EPERM")
	Killed  int            // the thread or the process
	Other   int            // trapped or logged

	// Conditional has one line per system call with argument rules, e.g.
	// "personality: allow if arg0 in {0x0, 0x8}; else errno EPERM".
	Conditional []string

	// FloorGaps lists what Floor refuses and this profile allows, e.g.
	// "ioctl TIOCSTI".
	FloorGaps []string
	// DefaultGaps lists what Default refuses, Floor does not, and this
	// profile allows, e.g. "bpf" or "socket (packet sockets ...)": what
	// a command may do under it that it may not under moat's default.
	DefaultGaps []string
}

// Summarize describes p on arch.
func Summarize(p *Profile, arch string) (*Summary, error) {
	prog, err := Compile(p, arch)
	if err != nil {
		return nil, err
	}
	s := &Summary{Arch: arch, Default: describe(p.DefaultAction, p.DefaultErrno), Denied: map[string]int{}}
	for name := range table(arch) {
		s.Total++
		a, errno := p.DefaultAction, p.DefaultErrno
		if r := unconditional(p, name); r != nil {
			a, errno = r.Action, r.Errno
		}
		switch a {
		case Allow:
			s.Allowed++
		case Errno:
			s.Denied[errnoName(errno)]++
		case KillProcess, KillThread:
			s.Killed++
		default:
			s.Other++
		}
	}
	s.Conditional = conditional(p, arch)
	for _, pr := range floorProbes() {
		nr, ok := Lookup(arch, pr.name)
		if !ok {
			continue
		}
		ret, _, err := run(prog, data{nr: uint32(nr), arch: auditArch(arch), args: pr.args})
		if err != nil {
			return nil, fmt.Errorf("seccomp: internal error: %w", err)
		}
		if a := ret &^ retData; a == retAllow || a == retLog {
			s.FloorGaps = append(s.FloorGaps, pr.what)
		}
	}
	s.DefaultGaps, err = defaultGaps(prog, arch)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// defaultGaps lists what Default refuses, Floor does not, and prog
// allows (or only logs): a call for each of Default's refusing rules,
// with arguments that meet its conditions.
func defaultGaps(prog []Instruction, arch string) ([]string, error) {
	def, err := Compile(Default(), arch)
	if err != nil {
		return nil, err
	}
	floor, err := Compile(Floor(), arch)
	if err != nil {
		return nil, err
	}
	allows := func(prog []Instruction, d data) (bool, error) {
		ret, _, err := run(prog, d)
		if err != nil {
			return false, fmt.Errorf("seccomp: internal error: %w", err)
		}
		a := ret &^ retData
		return a == retAllow || a == retLog, nil
	}
	var gaps []string
	for _, r := range Default().Rules {
		if r.Action == Allow {
			continue
		}
		args := r.Args
		if len(args) == 0 && slices.Contains(r.Names, "personality") {
			// The rules before it allow the harmless personalities:
			// ADDR_NO_RANDOMIZE is one it refuses.
			args = []Arg{{Index: 0, Op: EQ, Value: 0x0040000}}
		}
		var d data
		d.arch = auditArch(arch)
		for _, a := range args {
			d.args[a.Index] = meets(a)
		}
		for _, name := range r.Names {
			nr, ok := Lookup(arch, name)
			if !ok {
				continue
			}
			d.nr = uint32(nr)
			what := name
			if len(args) > 0 {
				what += " (" + r.Comment + ")"
			}
			if slices.Contains(gaps, what) {
				continue
			}
			defAllows, err := allows(def, d)
			if err != nil {
				return nil, err
			}
			floorAllows, err := allows(floor, d)
			if err != nil {
				return nil, err
			}
			profAllows, err := allows(prog, d)
			if err != nil {
				return nil, err
			}
			if !defAllows && floorAllows && profAllows {
				gaps = append(gaps, what)
			}
		}
	}
	return gaps, nil
}

// meets returns an argument value for which a holds.
func meets(a Arg) uint64 {
	switch a.Op {
	case MaskedEQ:
		return a.ValueTwo
	case NE, GT:
		return a.Value + 1
	case LT:
		return a.Value - 1
	}
	return a.Value // EQ, LE, GE
}

func auditArch(arch string) uint32 {
	if arch == ArchAarch64 {
		return auditArchAarch64
	}
	return auditArchX86_64
}

// unconditional is the first rule for name without argument conditions:
// it decides whenever no argument rule before it matches.
func unconditional(p *Profile, name string) *Rule {
	for i, r := range p.Rules {
		if len(r.Args) == 0 && slices.Contains(r.Names, name) {
			return &p.Rules[i]
		}
	}
	return nil
}

// conditional describes the argument rules of the system calls of arch, in
// profile order, merging neighbouring rules with the same decision that
// test the same argument for equality ("arg0 in {7, 8}") or for bits
// ("arg1 has any of bits 0xc00").
func conditional(p *Profile, arch string) []string {
	type clause struct {
		decision string
		conds    []string
		// For merging, a clause of one argument test: equality with
		// one of values, or having any of bits.
		merge  string // "", "eq" or "bits"
		index  uint
		values []uint64
		bits   uint64
	}
	var order []string
	byName := map[string][]clause{}
	done := map[string]bool{} // an unconditional rule decided: later ones are unreachable
	for _, r := range p.Rules {
		for _, name := range r.Names {
			if _, ok := Lookup(arch, name); !ok || done[name] {
				continue
			}
			if len(r.Args) == 0 {
				done[name] = true
				continue
			}
			c := clause{decision: describe(r.Action, r.Errno)}
			for _, a := range r.Args {
				c.conds = append(c.conds, argString(a))
			}
			if a := r.Args[0]; len(r.Args) == 1 {
				c.index = a.Index
				if v, ok := equality(a); ok {
					c.merge, c.values = "eq", []uint64{v}
				} else if a.Op == MaskedEQ && a.Value == a.ValueTwo {
					c.merge, c.bits = "bits", a.Value
				}
			}
			cs := byName[name]
			if cs == nil {
				order = append(order, name)
			}
			if n := len(cs); n > 0 && c.merge != "" && cs[n-1].merge == c.merge && cs[n-1].index == c.index && cs[n-1].decision == c.decision {
				cs[n-1].values = append(cs[n-1].values, c.values...)
				cs[n-1].bits |= c.bits
				cs[n-1].conds = nil
			} else {
				cs = append(cs, c)
			}
			byName[name] = cs
		}
	}
	var lines []string
	for _, name := range order {
		var parts []string
		for _, c := range byName[name] {
			cond := strings.Join(c.conds, " and ")
			switch {
			case c.conds != nil: // not merged
			case c.merge == "eq":
				vs := make([]string, len(c.values))
				for i, v := range c.values {
					vs[i] = number(v)
				}
				cond = fmt.Sprintf("arg%d in {%s}", c.index, strings.Join(vs, ", "))
			case c.merge == "bits":
				cond = fmt.Sprintf("arg%d has any of bits %#x", c.index, c.bits)
			}
			parts = append(parts, c.decision+" if "+cond)
		}
		otherwise := describe(p.DefaultAction, p.DefaultErrno)
		if r := unconditional(p, name); r != nil {
			otherwise = describe(r.Action, r.Errno)
		}
		lines = append(lines, fmt.Sprintf("%s: %s; else %s", name, strings.Join(parts, "; "), otherwise))
	}
	return lines
}

// equality is the value a compares an argument with for equality, if it
// does (EQ, or MaskedEQ of the low 32 bits).
func equality(a Arg) (uint64, bool) {
	switch {
	case a.Op == EQ:
		return a.Value, true
	case a.Op == MaskedEQ && a.Value == 0xffffffff:
		return a.ValueTwo, true
	}
	return 0, false
}

var opSymbols = sync.OnceValue(func() map[Op]string {
	return map[Op]string{NE: "!=", LT: "<", LE: "<=", EQ: "==", GE: ">=", GT: ">"}
})

func argString(a Arg) string {
	switch {
	case a.Op != MaskedEQ:
		return fmt.Sprintf("arg%d %s %s", a.Index, opSymbols()[a.Op], number(a.Value))
	case a.Value == 0xffffffff:
		return fmt.Sprintf("arg%d == %s", a.Index, number(a.ValueTwo))
	case a.Value == a.ValueTwo:
		return fmt.Sprintf("arg%d has bits %#x", a.Index, a.Value)
	}
	return fmt.Sprintf("arg%d & %#x == %s", a.Index, a.Value, number(a.ValueTwo))
}

// number is small numbers in decimal (families, errnos), others in hex
// (flags, ioctl requests).
func number(v uint64) string {
	if v < 256 {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%#x", v)
}

func describe(a Action, errno uint32) string {
	if a == Errno {
		if errno == 0 {
			errno = eperm
		}
		return "errno " + errnoName(errno)
	}
	return a.String()
}

var errnoNames = sync.OnceValue(func() map[uint32]string {
	return map[uint32]string{1: "EPERM", 2: "ENOENT", 5: "EIO", 9: "EBADF", 13: "EACCES", 14: "EFAULT",
		22: "EINVAL", 38: "ENOSYS", 93: "EPROTONOSUPPORT", 95: "EOPNOTSUPP", 97: "EAFNOSUPPORT"}
})

func errnoName(errno uint32) string {
	if errno == 0 {
		errno = eperm
	}
	if n, ok := errnoNames()[errno]; ok {
		return n
	}
	return fmt.Sprintf("errno %d", errno)
}

type probe struct {
	what string
	name string
	args [6]uint64
}

// floorProbes are calls Floor refuses, with arguments.
func floorProbes() []probe {
	probes := []probe{
		{what: "unshare", name: "unshare", args: [6]uint64{cloneNewUser}},
		{what: "setns", name: "setns"},
		{what: "clone3 (its flags cannot be checked)", name: "clone3"},
	}
	for _, f := range namespaceFlags {
		probes = append(probes, probe{what: "clone with " + f.name, name: "clone", args: [6]uint64{f.flag | 17}})
	}
	return append(probes,
		probe{what: "ioctl TIOCSTI", name: "ioctl", args: [6]uint64{0, tiocsti}},
		probe{what: "ioctl TIOCLINUX", name: "ioctl", args: [6]uint64{0, tioclinux}},
		probe{what: "MPTCP sockets (IPv4)", name: "socket", args: [6]uint64{afInet, 1, ipprotoMPTCP}},
		probe{what: "MPTCP sockets (IPv6)", name: "socket", args: [6]uint64{afInet6, 1, ipprotoMPTCP}},
		probe{what: "ptrace", name: "ptrace", args: [6]uint64{16}},
		probe{what: "set-id modes (openat with S_ISUID)", name: "openat", args: [6]uint64{0, 0, oCreat, sISUID | 0o755}},
		probe{what: "set-id modes (mknodat with S_ISGID)", name: "mknodat", args: [6]uint64{0, 0, sIFREG | sISGID | 0o755}},
		probe{what: "set-id modes (fchmodat with S_ISUID)", name: "fchmodat", args: [6]uint64{0, 0, sISUID | 0o755}},
		probe{what: "openat2 (its mode cannot be checked)", name: "openat2"},
		probe{what: "io_uring", name: "io_uring_setup"},
		probe{what: "kernel keyrings (keyctl: the caller's session keyring)", name: "keyctl"},
		probe{what: "kernel keyrings (add_key)", name: "add_key"},
	)
}
