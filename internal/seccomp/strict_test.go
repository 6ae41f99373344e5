package seccomp

import (
	"strings"
	"testing"
)

func TestStrict(t *testing.T) {
	cases := []struct {
		name string
		args []uint64
		want string
	}{
		// What init and the Go runtime do after the filter is installed.
		{"clone", []uint64{0x4111}, allow}, // CLONE_VFORK|CLONE_VM|SIGCHLD
		{"clone", []uint64{0x003d0f00}, allow},
		{"execve", nil, allow},
		{"wait4", nil, allow},
		{"kill", nil, allow},
		{"write", nil, allow},
		{"exit_group", nil, allow},
		{"futex", nil, allow},
		{"rt_sigreturn", nil, allow},
		{"mmap", nil, allow},
		{"pipe2", nil, allow},
		{"setsid", nil, allow},
		{"dup3", nil, allow},
		{"tgkill", nil, allow},
		{"sched_getaffinity", nil, allow},
		{"epoll_pwait", nil, allow},
		{"close_range", nil, allow},
		{"pidfd_open", nil, allow},

		// Everyday tools.
		{"openat", nil, allow},
		{"newfstatat", nil, allow},
		{"getdents64", nil, allow},
		{"renameat2", nil, allow},
		{"socket", []uint64{1, 1, 0}, allow},
		{"socket", []uint64{afInet, 1, 0}, allow},
		{"socket", []uint64{afInet6, 2, 0}, allow},
		{"socket", []uint64{afInet, 2, 1}, allow}, // ping socket
		{"socket", []uint64{afNetlink, 3, 0}, allow},
		{"connect", nil, allow},
		{"ioctl", []uint64{1, 0x5401}, allow},
		{"chmod", []uint64{0, 0o755}, allow},
		{"fchmodat", []uint64{0, 0, 0o644}, allow},
		{"personality", []uint64{perQuery}, allow},
		{"prctl", nil, allow},
		{"getrandom", nil, allow},

		// Refused.
		{"clone", []uint64{cloneNewUser | 17}, denied},
		{"clone", []uint64{cloneNewNS}, denied},
		{"clone3", nil, nosys},
		{"unshare", nil, denied},
		{"setns", nil, denied},
		{"mount", nil, denied},
		{"ptrace", nil, denied},
		{"bpf", nil, denied},
		{"io_uring_setup", nil, denied},
		{"keyctl", nil, denied},
		{"userfaultfd", nil, denied},
		{"perf_event_open", nil, denied},
		{"process_vm_readv", nil, denied},
		{"name_to_handle_at", nil, denied},
		{"adjtimex", nil, denied},
		{"modify_ldt", nil, denied},
		{"vmsplice", nil, denied},
		{"msgget", nil, denied},
		{"mq_open", nil, denied},
		{"fanotify_init", nil, denied},
		{"socket", []uint64{afInet, 1, ipprotoMPTCP}, denied},
		{"socket", []uint64{afInet6, 1, ipprotoMPTCP}, denied},
		{"socket", []uint64{afInet, sockRaw, 1}, denied},
		{"socket", []uint64{afPacket, 3, 0}, denied},
		{"socket", []uint64{afVsock, 1, 0}, denied},
		{"socket", []uint64{afNetlink, 3, 9}, denied},
		{"socket", []uint64{38, 5, 0}, denied}, // AF_ALG
		{"ioctl", []uint64{0, tiocsti}, denied},
		{"ioctl", []uint64{0, high | tioclinux}, denied},
		{"chmod", []uint64{0, 0o4755}, denied},
		{"fchmodat2", []uint64{0, 0, 0o2755, 0}, denied},
		{"personality", []uint64{0x0040000}, denied},
	}
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		prog := mustCompile(t, Strict(), arch)
		for _, c := range cases {
			if _, ok := Lookup(arch, c.name); !ok {
				continue // chmod, modify_ldt, ... are x86_64 only
			}
			if got, _ := eval(t, prog, arch, c.name, c.args...); got != c.want {
				t.Errorf("%s: %s%#o = %s, want %s", arch, c.name, c.args, got, c.want)
			}
		}
	}
}

// TestStrictNames checks that every name Strict allows exists, and that it
// allows nothing Default refuses outright.
func TestStrictNames(t *testing.T) {
	refused := map[string]bool{}
	for _, r := range Default().Rules {
		if len(r.Args) == 0 && r.Action != Allow {
			for _, n := range r.Names {
				refused[n] = true
			}
		}
	}
	seen := map[string]bool{}
	for _, g := range strictAllow {
		for _, n := range g.names {
			_, x := Lookup(ArchX86_64, n)
			_, a := Lookup(ArchAarch64, n)
			if !x && !a {
				t.Errorf("strict allows %q, which neither architecture has", n)
			}
			if refused[n] {
				t.Errorf("strict allows %q, which the default profile refuses", n)
			}
			if seen[n] {
				t.Errorf("strict lists %q twice", n)
			}
			seen[n] = true
		}
	}
}

// TestBuiltinsCoverFloor checks, for every call the floor refuses, that
// Default and Strict refuse it too: they run without the floor.
func TestBuiltinsCoverFloor(t *testing.T) {
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		for name, p := range map[string]*Profile{"default": Default(), "strict": Strict(), "floor": Floor()} {
			s, err := Summarize(p, arch)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.FloorGaps) > 0 {
				t.Errorf("%s on %s allows what the floor refuses: %v", name, arch, s.FloorGaps)
			}
		}
		s, err := Summarize(&Profile{DefaultAction: Allow}, arch)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.FloorGaps) != len(floorProbes()) {
			t.Errorf("%s: allow-all has gaps %v, want every probe", arch, s.FloorGaps)
		}
	}
}

func TestStrictRulesHaveComments(t *testing.T) {
	for i, r := range Strict().Rules {
		if strings.TrimSpace(r.Comment) == "" || strings.Contains(r.Comment, "\n") {
			t.Errorf("rule %d %v: want a one-line comment, got %q", i, r.Names, r.Comment)
		}
	}
}

func TestStrictInstructionCounts(t *testing.T) {
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		prog := mustCompile(t, Strict(), arch)
		var b strings.Builder
		for _, sc := range hot {
			_, steps := eval(t, prog, arch, sc)
			b.WriteString(" " + sc + "=" + itoa(uint64(steps)))
			if steps > 40 {
				t.Errorf("%s: %s runs %d instructions", arch, sc, steps)
			}
		}
		t.Logf("%s strict: %d instructions;%s", arch, len(prog), b.String())
	}
}

func TestSummaryConditional(t *testing.T) {
	s, err := Summarize(Default(), ArchX86_64)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"clone: errno EPERM if arg0 has any of bits 0x7e020080; else allow":                    true,
		"personality: allow if arg0 in {0, 8, 0x20000, 0x20008, 0xffffffff}; else errno EPERM": true,
		"ioctl: errno EPERM if arg1 in {0x5412, 0x541c}; else allow":                           true,
		"chmod: errno EPERM if arg1 has any of bits 0xc00; else allow":                         true,
		"openat: errno EPERM if arg3 has any of bits 0xc00; else allow":                        true,
		"mknod: errno EPERM if arg1 has any of bits 0xc00; else allow":                         true,
	}
	for _, l := range s.Conditional {
		delete(want, l)
	}
	if len(want) > 0 {
		t.Errorf("missing %v in\n%s", want, strings.Join(s.Conditional, "\n"))
	}
	if s.Default != "allow" || s.Denied["ENOSYS"] != 2 || s.Denied["EPERM"] < 40 { // clone3 and openat2
		t.Errorf("summary %+v", s)
	}
}
