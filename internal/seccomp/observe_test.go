package seccomp

import (
	"strings"
	"testing"
)

// TestObserved: the observed program notifies exactly where the original
// refuses with an errno, and Evaluate/ErrnoOf recover the errno to answer.
func TestObserved(t *testing.T) {
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		prog, err := Compile(Default(), arch)
		if err != nil {
			t.Fatal(err)
		}
		obs := Observed(prog)
		for _, name := range []string{"read", "unshare", "ptrace", "clone3", "mount", "getppid"} {
			nr, ok := Lookup(arch, name)
			if !ok {
				t.Fatalf("%s: no %s", arch, name)
			}
			orig, err1 := Evaluate(prog, int32(nr), AuditArch(arch), 0, [6]uint64{})
			got, err2 := Evaluate(obs, int32(nr), AuditArch(arch), 0, [6]uint64{})
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if _, refused := ErrnoOf(orig); refused {
				if got != retUserNotif {
					t.Errorf("%s %s: observed program returns %#x, want a notification", arch, name, got)
				}
			} else if got != orig {
				t.Errorf("%s %s: observed program changed %#x to %#x", arch, name, orig, got)
			}
		}
		// A foreign architecture is still killed, not notified.
		if got, _ := Evaluate(obs, 0, 0x40000003, 0, [6]uint64{}); got != retKillProcess {
			t.Errorf("%s: foreign arch gives %#x", arch, got)
		}
		if !SupervisorAllowed(prog, arch) {
			t.Errorf("%s: the default profile refuses the supervisor's ioctls", arch)
		}
	}
	if e, ok := ErrnoOf(retErrno | 38); !ok || e != 38 {
		t.Errorf("ErrnoOf: %d %v", e, ok)
	}
}

// TestWithExecNotify: execve and execveat of the native architecture are
// notified, every other call gets what the program underneath gives it,
// and a foreign architecture is still killed.
func TestWithExecNotify(t *testing.T) {
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		prog, err := Compile(Default(), arch)
		if err != nil {
			t.Fatal(err)
		}
		obs := Observed(prog)
		ex := WithExecNotify(obs, arch, nil)
		for _, name := range []string{"execve", "execveat", "read", "unshare", "mount", "getppid"} {
			nr, _ := Lookup(arch, name)
			want, _ := Evaluate(obs, int32(nr), AuditArch(arch), 0, [6]uint64{})
			if IsExec(arch, nr) {
				want = retUserNotif
			}
			got, err := Evaluate(ex, int32(nr), AuditArch(arch), 0, [6]uint64{})
			if err != nil || got != want {
				t.Errorf("%s %s: %#x, %v; want %#x", arch, name, got, err, want)
			}
		}
		nr, _ := Lookup(arch, "execve")
		if got, _ := Evaluate(ex, int32(nr), 0x40000003, 0, [6]uint64{}); got != retKillProcess {
			t.Errorf("%s: foreign arch execve gives %#x", arch, got)
		}
		// The first exec, named by both addresses, goes to the program
		// underneath; any other address, in either half, is notified.
		first := &FirstExec{Argv: 0x7f12_3456_7000, Envp: 0x7f12_3456_7800}
		fx := WithExecNotify(obs, arch, first)
		allow, _ := Evaluate(obs, int32(nr), AuditArch(arch), 0, [6]uint64{})
		for _, c := range []struct {
			args [6]uint64
			want uint32
		}{
			{[6]uint64{1, first.Argv, first.Envp}, allow},
			{[6]uint64{1, first.Argv, first.Envp + 8}, retUserNotif},
			{[6]uint64{1, first.Argv ^ 1<<40, first.Envp}, retUserNotif},
			{[6]uint64{1, first.Argv, first.Envp ^ 1<<33}, retUserNotif},
			{[6]uint64{1, first.Envp, first.Argv}, retUserNotif},
		} {
			if got, _ := Evaluate(fx, int32(nr), AuditArch(arch), 0, c.args); got != c.want {
				t.Errorf("%s: execve%x gives %#x, want %#x", arch, c.args[:3], got, c.want)
			}
		}
		at, _ := Lookup(arch, "execveat")
		if got, _ := Evaluate(fx, int32(at), AuditArch(arch), 0, [6]uint64{0, 1, first.Argv, first.Envp}); got != retUserNotif {
			t.Errorf("%s: execveat with the first exec's addresses gives %#x", arch, got)
		}
		rd, _ := Lookup(arch, "read")
		want, _ := Evaluate(obs, int32(rd), AuditArch(arch), 0, [6]uint64{})
		if got, _ := Evaluate(fx, int32(rd), AuditArch(arch), 0, [6]uint64{}); got != want {
			t.Errorf("%s: read gives %#x under the first-exec check, want %#x", arch, got, want)
		}
	}
}

func TestExecNumbers(t *testing.T) {
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		execve, execveat := execNumbers(arch)
		if nr, _ := Lookup(arch, "execve"); execve != nr {
			t.Errorf("%s: execve is %d, the table says %d", arch, execve, nr)
		}
		if nr, _ := Lookup(arch, "execveat"); execveat != nr {
			t.Errorf("%s: execveat is %d, the table says %d", arch, execveat, nr)
		}
	}
	if execve, execveat := execNumbers("mips"); execve != -1 || execveat != -1 {
		t.Errorf("mips: %d, %d; want -1, -1", execve, execveat)
	}
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		if nr, _ := Lookup(arch, "setsid"); setsidNumber(arch) != nr {
			t.Errorf("%s: setsid is %d, the table says %d", arch, setsidNumber(arch), nr)
		}
	}
	if nr := setsidNumber("mips"); nr != -1 {
		t.Errorf("mips: setsid %d; want -1", nr)
	}
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		if nr, _ := Lookup(arch, "listen"); listenNumber(arch) != nr {
			t.Errorf("%s: listen is %d, the table says %d", arch, listenNumber(arch), nr)
		}
	}
	if nr := listenNumber("mips"); nr != -1 {
		t.Errorf("mips: listen %d; want -1", nr)
	}
}

// TestWithSetsidNotify: setsid of the native architecture is notified,
// the execs still are (the check underneath), every other call gets what
// the program underneath gives it, and a foreign architecture is still
// killed, setsid included.
func TestWithSetsidNotify(t *testing.T) {
	for _, arch := range []string{ArchX86_64, ArchAarch64} {
		prog, err := Compile(Default(), arch)
		if err != nil {
			t.Fatal(err)
		}
		obs := Observed(prog)
		sx := WithSetsidNotify(WithExecNotify(obs, arch, nil), arch)
		for _, name := range []string{"setsid", "execve", "execveat", "read", "unshare", "getsid", "setpgid"} {
			nr, _ := Lookup(arch, name)
			want, _ := Evaluate(obs, int32(nr), AuditArch(arch), 0, [6]uint64{})
			if IsExec(arch, nr) || IsSetsid(arch, nr) {
				want = retUserNotif
			}
			got, err := Evaluate(sx, int32(nr), AuditArch(arch), 0, [6]uint64{})
			if err != nil || got != want {
				t.Errorf("%s %s: %#x, %v; want %#x", arch, name, got, err, want)
			}
		}
		nr, _ := Lookup(arch, "setsid")
		if got, _ := Evaluate(sx, int32(nr), 0x40000003, 0, [6]uint64{}); got != retKillProcess {
			t.Errorf("%s: foreign arch setsid gives %#x", arch, got)
		}
		if allow, _ := Evaluate(obs, int32(nr), AuditArch(arch), 0, [6]uint64{}); !Allows(allow) {
			t.Errorf("%s: the default profile refuses setsid (%#x), which the supervisor would then never be told of", arch, allow)
		}
	}
}

// TestRuleForExplainsTheRefusal: a refusal is explained by a rule that
// refuses with its errno, never by an allow rule naming the same call
// (personality's first rules allow), and where rules told apart by
// arguments could each have refused it, by all of them, the default
// included; a call with one refusing rule (ptrace) keeps its one comment.
func TestRuleForExplainsTheRefusal(t *testing.T) {
	d, s := Default(), Strict()
	for _, c := range []struct {
		p       *Profile
		name    string
		errno   int
		want    []string
		notWant string
	}{
		{d, "ptrace", eperm, []string{"tracing reads and rewrites other processes; the sandbox's init must stay out of reach"}, "; or "},
		{d, "personality", eperm, []string{"other personalities disable"}, "the default personality"},
		{d, "clone", eperm, []string{"CLONE_NEWUSER", "CLONE_NEWNS"}, ""},
		{d, "clone3", enosys, []string{"libc fall back to clone"}, "CLONE_NEWNS"},
		{d, "openat2", enosys, []string{"cannot be checked for set-id bits"}, "set-id mode: a setuid"},
		{s, "socket", eperm, []string{"packet sockets", "not in the profile's allow-list"}, ""},
		{s, "mount", eperm, []string{"not in the profile's allow-list"}, ""},
		{d, "ptrace", 13, nil, ""},
	} {
		got := RuleFor(c.p, c.name, c.errno)
		if c.want == nil && got != "" {
			t.Errorf("%s errno %d: %q, want none", c.name, c.errno, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s errno %d: %q, want %q in it", c.name, c.errno, got, w)
			}
		}
		if c.notWant != "" && strings.Contains(got, c.notWant) {
			t.Errorf("%s errno %d: %q, must not say %q", c.name, c.errno, got, c.notWant)
		}
	}
}
