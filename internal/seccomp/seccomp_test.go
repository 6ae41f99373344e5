package seccomp

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

var audits = map[string]uint32{ArchX86_64: auditArchX86_64, ArchAarch64: auditArchAarch64}

func mustCompile(t testing.TB, p *Profile, arch string) []Instruction {
	t.Helper()
	prog, err := Compile(p, arch)
	if err != nil {
		t.Fatalf("Compile(%s): %v", arch, err)
	}
	if err := check(prog); err != nil {
		t.Fatalf("Compile(%s): kernel would refuse the program: %v", arch, err)
	}
	return prog
}

// eval runs prog for the named system call on arch and returns the decision
// and the number of instructions executed.
func eval(t testing.TB, prog []Instruction, arch, name string, args ...uint64) (string, int) {
	t.Helper()
	nr, ok := Lookup(arch, name)
	if !ok {
		t.Fatalf("no %s on %s", name, arch)
	}
	d := data{nr: uint32(nr), arch: audits[arch]}
	copy(d.args[:], args)
	ret, steps, err := run(prog, d)
	if err != nil {
		t.Fatalf("%s%v on %s: %v", name, args, arch, err)
	}
	return decision(ret), steps
}

const (
	allow  = "allow"
	denied = "errno 1"
	nosys  = "errno 38"
	killed = "kill-process"
	high   = 1 << 32 // a bit in the upper half of a register
)

func TestDefault(t *testing.T) {
	cases := []struct {
		name string
		args []uint64
		want string
	}{
		{"mount", nil, denied},
		{"umount2", nil, denied},
		{"pivot_root", nil, denied},
		{"chroot", nil, denied},
		{"move_mount", nil, denied},
		{"open_tree", nil, denied},
		{"fsopen", nil, denied},
		{"fsconfig", nil, denied},
		{"fsmount", nil, denied},
		{"fspick", nil, denied},
		{"mount_setattr", nil, denied},
		{"open_tree_attr", nil, denied},
		{"unshare", nil, denied},
		{"setns", nil, denied},
		{"clone3", nil, nosys},
		{"ptrace", nil, denied},
		{"process_vm_readv", nil, denied},
		{"process_vm_writev", nil, denied},
		{"kcmp", nil, denied},
		{"bpf", nil, denied},
		{"perf_event_open", nil, denied},
		{"userfaultfd", nil, denied},
		{"io_uring_setup", nil, denied},
		{"io_uring_enter", nil, denied},
		{"io_uring_register", nil, denied},
		{"keyctl", nil, denied},
		{"add_key", nil, denied},
		{"request_key", nil, denied},
		{"kexec_load", nil, denied},
		{"kexec_file_load", nil, denied},
		{"init_module", nil, denied},
		{"finit_module", nil, denied},
		{"delete_module", nil, denied},
		{"open_by_handle_at", nil, denied},
		{"name_to_handle_at", nil, denied},
		{"acct", nil, denied},
		{"swapon", nil, denied},
		{"swapoff", nil, denied},
		{"reboot", nil, denied},
		{"syslog", nil, denied},
		{"settimeofday", nil, denied},
		{"clock_settime", nil, denied},
		{"clock_adjtime", nil, denied},
		{"adjtimex", nil, denied},
		{"quotactl", nil, denied},
		{"iopl", nil, denied},
		{"ioperm", nil, denied},
		{"lookup_dcookie", nil, denied},
		{"vhangup", nil, denied},

		// clone: flags in argument 0.
		{"clone", []uint64{0x01200011}, allow}, // fork: CLONE_CHILD_SETTID|CLONE_CHILD_CLEARTID|SIGCHLD
		{"clone", []uint64{0x003d0f00}, allow}, // a thread
		{"clone", []uint64{cloneNewUser | 17}, denied},
		{"clone", []uint64{cloneNewNS}, denied},
		{"clone", []uint64{cloneNewUTS}, denied},
		{"clone", []uint64{cloneNewIPC}, denied},
		{"clone", []uint64{cloneNewPID}, denied},
		{"clone", []uint64{cloneNewNet}, denied},
		{"clone", []uint64{cloneNewCgroup}, denied},
		{"clone", []uint64{cloneNewTime}, denied},
		{"clone", []uint64{high | cloneNewUser}, denied},
		{"clone", []uint64{high}, allow},

		// personality.
		{"personality", []uint64{0}, allow},
		{"personality", []uint64{0xffffffff}, allow},
		{"personality", []uint64{high | 0xffffffff}, allow},
		{"personality", []uint64{perLinux32}, allow},
		{"personality", []uint64{uname26}, allow},
		{"personality", []uint64{perLinux32 | uname26}, allow},
		{"personality", []uint64{0x0040000}, denied}, // ADDR_NO_RANDOMIZE
		{"personality", []uint64{0x0400000}, denied}, // READ_IMPLIES_EXEC
		{"personality", []uint64{1}, denied},

		// socket(family, type, protocol).
		{"socket", []uint64{afInet, 1, 0}, allow},    // TCP
		{"socket", []uint64{afInet6, 2, 0}, allow},   // UDP
		{"socket", []uint64{afInet, 2, 1}, allow},    // ICMP ping socket
		{"socket", []uint64{1, 1, 0}, allow},         // AF_UNIX
		{"socket", []uint64{afInet, 6, 0}, allow},    // SOCK_DCCP: 6 & 3 == 2 of SOCK_RAW's bits
		{"socket", []uint64{afInet, 7, 0}, allow},    // 7 has SOCK_RAW's bits but is not SOCK_RAW
		{"socket", []uint64{afNetlink, 3, 0}, allow}, // NETLINK_ROUTE
		{"socket", []uint64{afNetlink, 0x80003, 0}, allow},
		{"socket", []uint64{afNetlink, 3, 9}, denied}, // NETLINK_AUDIT
		{"socket", []uint64{afNetlink, 3, 15}, denied},
		{"socket", []uint64{afNetlink, 3, high}, denied}, // refused: NE looks at all 64 bits
		{"socket", []uint64{high | afNetlink, 3, 9}, denied},
		{"socket", []uint64{afPacket, 3, 0x300}, denied},
		{"socket", []uint64{high | afPacket, 3, 0x300}, denied},
		{"socket", []uint64{afVsock, 1, 0}, denied},
		{"socket", []uint64{afInet, sockRaw, 1}, denied},
		{"socket", []uint64{afInet6, sockRaw | 0x80000 | 0x800, 58}, denied}, // with SOCK_CLOEXEC|SOCK_NONBLOCK
		{"socket", []uint64{afInet, 1, ipprotoMPTCP}, denied},
		{"socket", []uint64{afInet6, 1, ipprotoMPTCP}, denied},
		{"socket", []uint64{afInet6, 1, high | ipprotoMPTCP}, denied},
		{"socket", []uint64{1, 1, ipprotoMPTCP}, allow}, // AF_UNIX ignores the protocol
		{"socketpair", []uint64{1, 1, 0}, allow},

		// chmod and friends: setuid and setgid bits.
		{"chmod", []uint64{0, 0o755}, allow},
		{"chmod", []uint64{0, 0o4755}, denied},
		{"chmod", []uint64{0, 0o2755}, denied},
		{"chmod", []uint64{0, 0o6755}, denied},
		{"chmod", []uint64{0, 0o1777}, allow}, // sticky
		{"fchmod", []uint64{3, 0o644}, allow},
		{"fchmod", []uint64{3, 0o4644}, denied},
		{"fchmodat", []uint64{0, 0, 0o755}, allow},
		{"fchmodat", []uint64{0, 0o4755, 0o755}, allow}, // the bit in the wrong argument
		{"fchmodat", []uint64{0, 0, 0o4755}, denied},
		{"fchmodat", []uint64{0, 0, 0o2755}, denied},
		{"fchmodat2", []uint64{0, 0, 0o2755, 0}, denied},
		{"fchmodat2", []uint64{0, 0, 0o755, 0}, allow},

		// ioctl: the command is an unsigned int in argument 1.
		{"ioctl", []uint64{0, 0x5401}, allow}, // TCGETS
		{"ioctl", []uint64{0, 0x5413}, allow}, // TIOCGWINSZ
		{"ioctl", []uint64{0, tiocsti}, denied},
		{"ioctl", []uint64{0, tioclinux}, denied},
		{"ioctl", []uint64{0, high | tiocsti}, denied},
		{"ioctl", []uint64{0, 0xffffffff00000000 | tiocsti}, denied},
		{"ioctl", []uint64{0, 0xffffffff00000000 | tioclinux}, denied},
		{"ioctl", []uint64{tiocsti, 0}, allow},

		// Ordinary calls.
		{"read", nil, allow},
		{"write", nil, allow},
		{"getppid", nil, allow},
		{"openat", nil, allow},
		{"execve", nil, allow},
		{"futex", nil, allow},
		{"rseq_slice_yield", nil, allow}, // the highest number known
	}
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		prog := mustCompile(t, Default(), arch)
		for _, c := range cases {
			if _, ok := Lookup(arch, c.name); !ok {
				if arch == ArchAarch64 && c.name != "clone" {
					continue // chmod, iopl, ... do not exist there
				}
				t.Fatalf("no %s on %s", c.name, arch)
			}
			if got, _ := eval(t, prog, arch, c.name, c.args...); got != c.want {
				t.Errorf("%s: %s%#o = %s, want %s", arch, c.name, c.args, got, c.want)
			}
		}
	}
}

func TestDefaultRulesHaveComments(t *testing.T) {
	for _, p := range []*Profile{Default(), Floor()} {
		for i, r := range p.Rules {
			if strings.TrimSpace(r.Comment) == "" || strings.Contains(r.Comment, "\n") {
				t.Errorf("rule %d %v: want a one-line comment, got %q", i, r.Names, r.Comment)
			}
		}
	}
}

func TestFloor(t *testing.T) {
	cases := []struct {
		name string
		args []uint64
		want string
	}{
		{"unshare", nil, denied},
		{"setns", nil, denied},
		{"clone3", nil, nosys},
		{"clone", []uint64{cloneNewUser}, denied},
		{"clone", []uint64{0x01200011}, allow},
		{"ioctl", []uint64{0, tiocsti}, denied},
		{"ioctl", []uint64{0, tioclinux}, denied},
		{"ioctl", []uint64{0, 0x5401}, allow},
		{"socket", []uint64{afInet, 1, ipprotoMPTCP}, denied},
		{"socket", []uint64{afInet6, 1, ipprotoMPTCP}, denied},
		{"socket", []uint64{afInet, 1, 0}, allow},
		{"socket", []uint64{afPacket, 3, 0}, allow}, // left to the custom profile
		{"ptrace", nil, denied},
		{"openat", []uint64{0, 0, oCreat, sISUID | 0o755}, denied},
		{"openat", []uint64{0, 0, oCreat, 0o755}, allow},
		{"openat2", nil, nosys},
		{"io_uring_setup", nil, denied},
		{"mount", nil, allow},
	}
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		prog := mustCompile(t, Floor(), arch)
		for _, c := range cases {
			if got, _ := eval(t, prog, arch, c.name, c.args...); got != c.want {
				t.Errorf("%s: %s%#x = %s, want %s", arch, c.name, c.args, got, c.want)
			}
		}
	}
}

func TestArchitecture(t *testing.T) {
	x86 := mustCompile(t, Default(), ArchX86_64)
	arm := mustCompile(t, Default(), ArchAarch64)
	read, _ := Lookup(ArchX86_64, "read")
	cases := []struct {
		name string
		prog []Instruction
		d    data
		want string
	}{
		{"x86_64 read", x86, data{nr: uint32(read), arch: auditArchX86_64}, allow},
		{"i386 on x86_64", x86, data{nr: 3, arch: 0x40000003}, killed},
		{"aarch64 on x86_64", x86, data{nr: 63, arch: auditArchAarch64}, killed},
		{"x32 read", x86, data{nr: x32SyscallBit, arch: auditArchX86_64}, killed},
		{"x32 mount", x86, data{nr: x32SyscallBit | 165, arch: auditArchX86_64}, killed},
		{"nr -1", x86, data{nr: 0xffffffff, arch: auditArchX86_64}, killed},
		{"x86_64 on aarch64", arm, data{nr: 0, arch: auditArchX86_64}, killed},
		{"arm on aarch64", arm, data{nr: 3, arch: 0x40000028}, killed},
		{"aarch64 read", arm, data{nr: 63, arch: auditArchAarch64}, allow},
		{"aarch64 with the x32 bit", arm, data{nr: x32SyscallBit, arch: auditArchAarch64}, allow},
		{"unknown number", x86, data{nr: 100000, arch: auditArchX86_64}, allow},
	}
	for _, c := range cases {
		ret, _, err := run(c.prog, c.d)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := decision(ret); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}

// match is the meaning of an Arg, computed in Go.
func match(a Arg, v uint64) bool {
	switch a.Op {
	case NE:
		return v != a.Value
	case LT:
		return v < a.Value
	case LE:
		return v <= a.Value
	case EQ:
		return v == a.Value
	case GE:
		return v >= a.Value
	case GT:
		return v > a.Value
	case MaskedEQ:
		return v&a.Value == a.ValueTwo
	}
	panic("bad op")
}

// TestOperators checks each operator against its meaning in Go, for values
// whose 32-bit halves differ and around every boundary between halves.
func TestOperators(t *testing.T) {
	refs := []uint64{0, 1, 0xffffffff, 1 << 32, 0x0000000100000002, 0x0000000200000001,
		0x8000000080000000, 0xfffffffe00000005, 0xffffffffffffffff, 0x7fffffff7fffffff}
	var probes []uint64
	for _, r := range refs {
		for _, d := range []uint64{0, 1, 1 << 32, 1<<32 + 1} {
			probes = append(probes, r+d, r-d, r^d)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		probes = append(probes, rng.Uint64(), rng.Uint64()&0xffffffff, rng.Uint64()&^0xffffffff)
	}
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		for op := NE; op <= MaskedEQ; op++ {
			for _, ref := range refs {
				for _, idx := range []uint{0, 3, 5} {
					a := Arg{Index: idx, Op: op, Value: ref}
					if op == MaskedEQ {
						a.ValueTwo = ref & 0x0000ffff0000ff0f
					}
					p := &Profile{DefaultAction: Allow, Rules: []Rule{
						{Names: []string{"getpid"}, Action: Errno, Errno: 99, Args: []Arg{a}},
					}}
					prog := mustCompile(t, p, arch)
					for _, v := range probes {
						args := make([]uint64, 6)
						args[idx] = v
						args[(idx+1)%6] = ^v // a neighbour that must not matter
						got, _ := eval(t, prog, arch, "getpid", args...)
						want := allow
						if match(a, v) {
							want = "errno 99"
						}
						if got != want {
							t.Fatalf("%s: arg%d %v %#x (two %#x) with value %#x: got %s, want %s",
								arch, idx, op, a.Value, a.ValueTwo, v, got, want)
						}
					}
				}
			}
		}
	}
}

// TestRuleOrder checks that the arguments of a rule are ANDed, that rules for
// one system call are tried in order and the first match decides, and every
// action's return value.
func TestRuleOrder(t *testing.T) {
	p := &Profile{DefaultAction: Errno, DefaultErrno: 13, Rules: []Rule{
		{Names: []string{"write"}, Action: Allow, Args: []Arg{{Index: 0, Op: EQ, Value: 1}, {Index: 2, Op: LT, Value: 100}}},
		{Names: []string{"write"}, Action: Errno, Errno: 7, Args: []Arg{{Index: 0, Op: EQ, Value: 1}}},
		{Names: []string{"write"}, Action: Log, Args: []Arg{{Index: 0, Op: EQ, Value: 2}}},
		{Names: []string{"write", "read"}, Action: Trap, Args: []Arg{{Index: 0, Op: GE, Value: 3}}},
		{Names: []string{"getpid"}, Action: KillThread},
		{Names: []string{"getppid"}, Action: KillProcess},
		{Names: []string{"gettid"}, Action: Errno},
		{Names: []string{"getuid"}, Action: Allow},
		{Names: []string{"getuid"}, Action: KillProcess}, // never reached
	}}
	cases := []struct {
		name string
		args []uint64
		want string
	}{
		{"write", []uint64{1, 0, 10}, allow},
		{"write", []uint64{1, 0, 100}, "errno 7"},
		{"write", []uint64{2, 0, 10}, "log"},
		{"write", []uint64{3}, "trap"},
		{"write", []uint64{0}, "errno 13"},
		{"read", []uint64{5}, "trap"},
		{"read", []uint64{1}, "errno 13"},
		{"getpid", nil, "kill-thread"},
		{"getppid", nil, "kill-process"},
		{"gettid", nil, "errno 1"},
		{"getuid", nil, allow},
		{"getgid", nil, "errno 13"},
	}
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		prog := mustCompile(t, p, arch)
		for _, c := range cases {
			if got, _ := eval(t, prog, arch, c.name, c.args...); got != c.want {
				t.Errorf("%s: %s%v = %s, want %s", arch, c.name, c.args, got, c.want)
			}
		}
	}
}

// TestLongJumps makes programs far larger than a conditional jump can cross,
// so the assembler must insert trampolines, and checks they still decide
// right.
func TestLongJumps(t *testing.T) {
	var rules []Rule
	names := []string{"read", "openat", "getppid", "mkdirat", "ioctl", "socket"}
	for n, name := range names {
		for i := range 60 {
			rules = append(rules, Rule{Names: []string{name}, Action: Errno, Errno: uint32(100*n + i + 1),
				Args: []Arg{{Index: 1, Op: EQ, Value: uint64(i)<<32 | uint64(i)}}})
		}
	}
	p := &Profile{DefaultAction: Allow, Rules: rules}
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		prog := mustCompile(t, p, arch)
		if len(prog) < 1000 {
			t.Fatalf("%s: program of %d instructions is too small to test long jumps", arch, len(prog))
		}
		trampolines := 0
		for _, in := range prog {
			if in.Code == ja {
				trampolines++
			}
		}
		if trampolines == 0 {
			t.Fatalf("%s: no trampoline in a program of %d instructions", arch, len(prog))
		}
		for n, name := range names {
			for _, i := range []uint64{0, 1, 30, 59} {
				if got, _ := eval(t, prog, arch, name, 0, i<<32|i); got != "errno "+itoa(uint64(100*n)+i+1) {
					t.Errorf("%s: %s(0, %d) = %s", arch, name, i, got)
				}
			}
			if got, _ := eval(t, prog, arch, name, 0, 60); got != allow {
				t.Errorf("%s: %s(0, 60) = %s", arch, name, got)
			}
		}
		if got, _ := eval(t, prog, arch, "write"); got != allow {
			t.Errorf("%s: write = %s", arch, got)
		}
	}
}

func itoa(i uint64) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

func TestTooLong(t *testing.T) {
	var rules []Rule
	for i := range 1200 {
		rules = append(rules, Rule{Names: []string{"read"}, Action: Errno, Args: []Arg{{Index: 0, Op: EQ, Value: uint64(i)}}})
	}
	_, err := Compile(&Profile{DefaultAction: Allow, Rules: rules}, ArchX86_64)
	if err == nil || !strings.Contains(err.Error(), "limit of 4096") {
		t.Fatalf("got %v, want an error about the 4096-instruction limit", err)
	}
}

func TestCompileErrors(t *testing.T) {
	ok := Rule{Names: []string{"read"}, Action: Allow}
	cases := []struct {
		name string
		p    *Profile
		arch string
		want string
	}{
		{"nil", nil, ArchX86_64, "nil profile"},
		{"no default", &Profile{}, ArchX86_64, "default action"},
		{"unknown arch", &Profile{DefaultAction: Allow}, "riscv64", `architecture "riscv64" not supported`},
		{"arch not listed", &Profile{DefaultAction: Allow, Arches: []string{ArchAarch64}}, ArchX86_64, "does not allow architecture x86_64"},
		{"bad arch listed", &Profile{DefaultAction: Allow, Arches: []string{"x32"}}, ArchX86_64, `architecture "x32": not supported`},
		{"unknown syscall", &Profile{DefaultAction: Allow, Rules: []Rule{ok, {Names: []string{"read", "frobnicate"}, Action: Allow}}}, ArchX86_64, `unknown system call "frobnicate"`},
		{"no names", &Profile{DefaultAction: Allow, Rules: []Rule{{Action: Allow}}}, ArchX86_64, "no system call names"},
		{"no action", &Profile{DefaultAction: Allow, Rules: []Rule{{Names: []string{"read"}}}}, ArchX86_64, "invalid action"},
		{"errno", &Profile{DefaultAction: Allow, Rules: []Rule{{Names: []string{"read"}, Action: Errno, Errno: 5000}}}, ArchX86_64, "errno 5000"},
		{"default errno", &Profile{DefaultAction: Errno, DefaultErrno: 70000}, ArchX86_64, "default errno 70000"},
		{"index", &Profile{DefaultAction: Allow, Rules: []Rule{{Names: []string{"read"}, Action: Allow, Args: []Arg{{Index: 6, Op: EQ}}}}}, ArchX86_64, "index 6 above 5"},
		{"op", &Profile{DefaultAction: Allow, Rules: []Rule{{Names: []string{"read"}, Action: Allow, Args: []Arg{{Index: 0}}}}}, ArchX86_64, "invalid operator"},
	}
	for _, c := range cases {
		_, err := Compile(c.p, c.arch)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	_, err := Compile(&Profile{DefaultAction: Allow, Rules: []Rule{{Names: []string{"frobnicate"}, Action: Allow}}}, ArchAarch64)
	if !errors.Is(err, ErrUnknownSyscall) {
		t.Errorf("unknown syscall: %v does not wrap ErrUnknownSyscall", err)
	}
}

// TestOtherArchNames checks that names of other architectures are skipped,
// not refused: Docker's profiles list i386 and arm calls next to the others.
func TestOtherArchNames(t *testing.T) {
	p := &Profile{DefaultAction: Allow, Rules: []Rule{
		{Names: []string{"chmod", "_llseek", "mkdirat"}, Action: Errno},
	}}
	x86 := mustCompile(t, p, ArchX86_64)
	arm := mustCompile(t, p, ArchAarch64)
	if got, _ := eval(t, x86, ArchX86_64, "chmod"); got != denied {
		t.Errorf("x86_64 chmod = %s", got)
	}
	if got, _ := eval(t, arm, ArchAarch64, "mkdirat"); got != denied {
		t.Errorf("aarch64 mkdirat = %s", got)
	}
	if got, _ := eval(t, arm, ArchAarch64, "read"); got != allow {
		t.Errorf("aarch64 read = %s", got)
	}
}

func TestLookup(t *testing.T) {
	for _, c := range []struct {
		arch, name string
		nr         int
	}{
		{ArchX86_64, "read", 0}, {ArchX86_64, "getppid", 110}, {ArchX86_64, "clone3", 435},
		{ArchX86_64, "newfstatat", 262}, {ArchAarch64, "read", 63}, {ArchAarch64, "newfstatat", 79},
		{ArchAarch64, "clone", 220},
	} {
		nr, ok := Lookup(c.arch, c.name)
		if !ok || nr != c.nr {
			t.Errorf("Lookup(%s, %s) = %d, %v; want %d", c.arch, c.name, nr, ok, c.nr)
		}
		if name, ok := Name(c.arch, c.nr); !ok || name != c.name {
			t.Errorf("Name(%s, %d) = %s, %v; want %s", c.arch, c.nr, name, ok, c.name)
		}
	}
	if _, ok := Lookup(ArchAarch64, "chmod"); ok {
		t.Error("aarch64 has no chmod")
	}
	if _, ok := Lookup("sparc", "read"); ok {
		t.Error("sparc is not supported")
	}
}

// hot are common system calls whose cost under the filter matters.
var hot = []string{"read", "write", "getppid", "futex", "openat", "close", "mmap", "newfstatat", "epoll_pwait", "ioctl", "socket", "clone"}

// TestInstructionCounts reports how many BPF instructions the default
// profile runs per system call, and bounds them.
func TestInstructionCounts(t *testing.T) {
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		for name, p := range map[string]*Profile{"default": Default(), "floor": Floor()} {
			prog := mustCompile(t, p, arch)
			var b strings.Builder
			for _, sc := range hot {
				_, steps := eval(t, prog, arch, sc)
				b.WriteString(" " + sc + "=" + itoa(uint64(steps)))
				limit := 14
				if sc == "ioctl" || sc == "socket" || sc == "clone" || sc == "openat" {
					limit = 40 // these have argument rules
				}
				if steps > limit {
					t.Errorf("%s %s: %s runs %d instructions, want at most %d", arch, name, sc, steps, limit)
				}
			}
			t.Logf("%s %s: %d instructions;%s", arch, name, len(prog), b.String())
		}
	}
}

func BenchmarkDefault(b *testing.B) {
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		prog := mustCompile(b, Default(), arch)
		for _, sc := range []string{"getppid", "read", "write"} {
			b.Run(arch+"/"+sc, func(b *testing.B) {
				nr, _ := Lookup(arch, sc)
				d := data{nr: uint32(nr), arch: audits[arch]}
				var steps int
				for b.Loop() {
					_, steps, _ = run(prog, d)
				}
				b.ReportMetric(float64(steps), "insns/call")
			})
		}
	}
}

func FuzzCompile(f *testing.F) {
	f.Add(uint8(EQ), uint64(5), uint64(0), uint64(5))
	f.Add(uint8(MaskedEQ), uint64(0xff00000000), uint64(0x1100000000), uint64(0x11ffffffff))
	f.Add(uint8(LT), uint64(1<<32), uint64(0), uint64(0xffffffff))
	f.Fuzz(func(t *testing.T, op uint8, value, two, v uint64) {
		a := Arg{Index: 2, Op: Op(op%7 + 1), Value: value, ValueTwo: two}
		p := &Profile{DefaultAction: Allow, Rules: []Rule{{Names: []string{"read"}, Action: Errno, Args: []Arg{a}}}}
		prog := mustCompile(t, p, ArchX86_64)
		got, _ := eval(t, prog, ArchX86_64, "read", 0, 0, v)
		if want := match(a, v); want != (got == denied) {
			t.Fatalf("%v %#x (two %#x) on %#x: got %s", a.Op, value, two, v, got)
		}
	})
}

// BenchmarkCompile is the cost every run pays before it starts: the default
// profile and the floor, compiled for this machine.
func BenchmarkCompile(b *testing.B) {
	for _, p := range []struct {
		name string
		p    *Profile
	}{{"default", Default()}, {"floor", Floor()}, {"strict", Strict()}} {
		b.Run(p.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				prog, err := Compile(p.p, ArchX86_64)
				if err != nil {
					b.Fatal(err)
				}
				n = len(prog)
			}
			b.ReportMetric(float64(n), "insns")
		})
	}
}

// TestSetidModes: every call that gives a file a mode refuses the setuid
// and setgid bits in it under each built-in profile, and allows the same
// call without them; openat2, whose mode is in memory, gets ENOSYS.
func TestSetidModes(t *testing.T) {
	calls := []struct {
		name string
		mode int      // index of the mode argument
		args []uint64 // the other arguments
	}{
		{"chmod", 1, []uint64{0, 0}},
		{"fchmod", 1, []uint64{3, 0}},
		{"fchmodat", 2, []uint64{0, 0, 0, 0}},
		{"fchmodat2", 2, []uint64{0, 0, 0, 0}},
		{"open", 2, []uint64{0, oCreat | 1, 0}},
		{"openat", 3, []uint64{0, 0, oCreat | 1, 0}},
		{"openat", 3, []uint64{0, 0, 0o20200000 | 1, 0}}, // O_TMPFILE
		{"creat", 1, []uint64{0, 0}},
		{"mknod", 1, []uint64{0, sIFREG, 0}},
		{"mknodat", 2, []uint64{0, 0, sIFREG, 0}},
		{"mknodat", 2, []uint64{0, 0, 0o10000, 0}}, // a FIFO
	}
	modes := []struct {
		mode uint64
		want string
	}{
		{0o755, allow},
		{0o1777, allow}, // sticky
		{0o4755, denied},
		{0o2755, denied},
		{0o6755, denied},
		{0o4000, denied},
		{high | 0o4755, denied}, // the kernel ignores the upper half
		{high | 0o755, allow},
	}
	for _, bi := range builtins {
		for _, arch := range []string{ArchX86_64, ArchAarch64} {
			prog := mustCompile(t, bi.profile(), arch)
			for _, c := range calls {
				if _, ok := Lookup(arch, c.name); !ok {
					if arch == ArchX86_64 {
						t.Fatalf("no %s on x86_64", c.name)
					}
					continue // aarch64 has only the *at forms
				}
				for _, m := range modes {
					args := append([]uint64(nil), c.args...)
					args[c.mode] |= m.mode
					if got, _ := eval(t, prog, arch, c.name, args...); got != m.want {
						t.Errorf("%s, %s: %s%#o = %s, want %s", bi.name, arch, c.name, args, got, m.want)
					}
				}
			}
			for _, c := range []struct {
				name string
				args []uint64
				want string
			}{
				{"openat2", []uint64{0, 0, 0, 24}, nosys},
				{"io_uring_setup", []uint64{1, 0}, denied},
				// mkdir keeps only the permission and sticky bits of its
				// mode: set-id bits there are left to the kernel to drop.
				{"mkdirat", []uint64{0, 0, 0o2755}, allow},
				{"mkdir", []uint64{0, 0o6755}, allow},
			} {
				if _, ok := Lookup(arch, c.name); !ok {
					continue
				}
				if got, _ := eval(t, prog, arch, c.name, c.args...); got != c.want {
					t.Errorf("%s, %s: %s%#o = %s, want %s", bi.name, arch, c.name, c.args, got, c.want)
				}
			}
		}
	}
}
