package seccomp

import (
	"os"
	"slices"
	"strings"
	"testing"
)

var (
	x86Target = Target{Arch: ArchX86_64, Kernel: KernelVersion{6, 18}}
	armTarget = Target{Arch: ArchAarch64, Kernel: KernelVersion{6, 18}}
)

func dockerDefault(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/docker-default.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t testing.TB, src string, tg Target) *Docker {
	t.Helper()
	d, err := ParseDocker("p.json", []byte(src), tg)
	if err != nil {
		t.Fatalf("ParseDocker:\n%v", err)
	}
	return d
}

// TestDockerDefault loads Docker's own default profile and checks its
// decisions for moat's command: no capabilities, so the CAP_SYS_ADMIN rules
// are left out and clone is allowed only without namespace flags.
func TestDockerDefault(t *testing.T) {
	cases := []struct {
		name string
		args []uint64
		want string
	}{
		{"read", nil, allow},
		{"execve", nil, allow},
		{"futex", nil, allow},
		{"clone", []uint64{0x01200011}, allow},
		{"clone", []uint64{0x003d0f00}, allow},
		{"clone", []uint64{cloneNewUser | 17}, denied},
		{"clone", []uint64{cloneNewNet}, denied},
		{"clone3", nil, nosys},
		{"unshare", nil, denied},
		{"setns", nil, denied},
		{"mount", nil, denied},
		{"bpf", nil, denied},
		{"keyctl", nil, denied},
		{"io_uring_setup", nil, denied},
		{"open_by_handle_at", nil, denied}, // CAP_DAC_READ_SEARCH only
		{"ptrace", nil, allow},             // minKernel 4.8: the floor refuses it
		{"process_vm_readv", nil, allow},
		{"socket", []uint64{afInet, 1, 0}, allow},
		{"socket", []uint64{afInet, 1, ipprotoMPTCP}, allow}, // the floor refuses it
		{"socket", []uint64{afVsock, 1, 0}, denied},
		{"socket", []uint64{afPacket, 3, 0}, allow},
		{"socket", []uint64{38, 5, 0}, denied}, // AF_ALG
		{"ioctl", []uint64{0, tiocsti}, allow}, // the floor refuses it
		{"personality", []uint64{0}, allow},
		{"personality", []uint64{0x0040000}, denied},
	}
	for _, tg := range []Target{x86Target, armTarget} {
		d, err := ParseDocker("docker-default.json", dockerDefault(t), tg)
		if err != nil {
			t.Fatal(err)
		}
		prog := mustCompile(t, d.Profile, tg.Arch)
		for _, c := range cases {
			if got, _ := eval(t, prog, tg.Arch, c.name, c.args...); got != c.want {
				t.Errorf("%s: %s%#x = %s, want %s", tg.Arch, c.name, c.args, got, c.want)
			}
		}
		if len(d.Dropped) == 0 || len(d.Skipped) == 0 {
			t.Errorf("%s: dropped %v, skipped %v: want some of each", tg.Arch, d.Dropped, d.Skipped)
		}
	}

	// Architecture-specific rules.
	x86 := mustCompile(t, mustParse(t, string(dockerDefault(t)), x86Target).Profile, ArchX86_64)
	if got, _ := eval(t, x86, ArchX86_64, "arch_prctl"); got != allow {
		t.Errorf("x86_64 arch_prctl = %s", got)
	}
	if got, _ := eval(t, x86, ArchX86_64, "chmod", 0, 0o755); got != allow {
		t.Errorf("x86_64 chmod = %s", got)
	}

	// The conditions follow the target.
	old := x86Target
	old.Kernel = KernelVersion{4, 4}
	prog := mustCompile(t, mustParse(t, string(dockerDefault(t)), old).Profile, ArchX86_64)
	if got, _ := eval(t, prog, ArchX86_64, "ptrace"); got != denied {
		t.Errorf("ptrace on kernel 4.4 = %s, want denied (minKernel 4.8)", got)
	}
	admin := x86Target
	admin.Caps = []string{"CAP_SYS_ADMIN"}
	prog = mustCompile(t, mustParse(t, string(dockerDefault(t)), admin).Profile, ArchX86_64)
	for _, c := range []struct {
		name string
		args []uint64
		want string
	}{{"mount", nil, allow}, {"clone", []uint64{cloneNewUser}, allow}, {"clone3", nil, allow}} {
		if got, _ := eval(t, prog, ArchX86_64, c.name, c.args...); got != c.want {
			t.Errorf("with CAP_SYS_ADMIN: %s = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestDockerDefaultSummary(t *testing.T) {
	d := mustParse(t, string(dockerDefault(t)), x86Target)
	s, err := Summarize(d.Profile, ArchX86_64)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ioctl TIOCSTI", "ioctl TIOCLINUX", "MPTCP sockets (IPv4)", "MPTCP sockets (IPv6)", "ptrace",
		"set-id modes (openat with S_ISUID)", "set-id modes (mknodat with S_ISGID)", "set-id modes (fchmodat with S_ISUID)",
		"openat2 (its mode cannot be checked)"}
	if !slices.Equal(s.FloorGaps, want) {
		t.Errorf("floor gaps %q, want %q", s.FloorGaps, want)
	}
	if s.Default != "errno EPERM" || s.Denied["ENOSYS"] != 1 || s.Allowed < 250 || s.Killed != 0 {
		t.Errorf("summary %+v", s)
	}
	if !slices.Contains(s.Conditional, "clone: allow if arg0 & 0x7e020000 == 0; else errno EPERM") {
		t.Errorf("conditional rules:\n%s", strings.Join(s.Conditional, "\n"))
	}
}

// TestDockerRules checks each action, operator and field of the format
// through the compiled program.
func TestDockerRules(t *testing.T) {
	src := `{
	"defaultAction": "SCMP_ACT_ALLOW",
	"architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_AARCH64"],
	"flags": ["SECCOMP_FILTER_FLAG_LOG"],
	"syscalls": [
		{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13, "comment": "no directories"},
		{"name": "rmdir", "action": "SCMP_ACT_ERRNO"},
		{"names": ["personality"], "action": "SCMP_ACT_ERRNO", "errnoRet": 22,
		 "args": [{"index": 0, "value": 262144, "op": "SCMP_CMP_EQ"}]},
		{"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 97,
		 "args": [{"index": 0, "value": 10, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]},
		{"names": ["write"], "action": "SCMP_ACT_LOG", "args": [{"index": 2, "value": 4096, "op": "SCMP_CMP_GT"}]},
		{"names": ["read"], "action": "SCMP_ACT_TRAP", "args": [{"index": 2, "value": 0, "op": "SCMP_CMP_NE"}, {"index": 0, "value": 99, "op": "SCMP_CMP_EQ"}]},
		{"names": ["openat"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 2, "value": 3, "valueTwo": 1, "op": "SCMP_CMP_MASKED_EQ"}]},
		{"names": ["getpid"], "action": "SCMP_ACT_KILL"},
		{"names": ["getppid"], "action": "SCMP_ACT_KILL_PROCESS"},
		{"names": ["gettid"], "action": "SCMP_ACT_KILL_THREAD"},
		{"names": ["lseek"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 10, "op": "SCMP_CMP_LT"}]},
		{"names": ["pread64"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 3, "value": 10, "op": "SCMP_CMP_LE"}]},
		{"names": ["pwrite64"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 3, "value": 10, "op": "SCMP_CMP_GE"}]},
		{"names": ["chmod", "_llseek"], "action": "SCMP_ACT_ERRNO"},
		{"names": ["fchown"], "action": "SCMP_ACT_ERRNO", "includes": {"arches": ["arm64"]}},
		{"names": ["fchownat"], "action": "SCMP_ACT_ERRNO", "excludes": {"arches": ["arm64"], "minKernel": "99.0"}},
		{"names": ["sync"], "action": "SCMP_ACT_ERRNO", "includes": {"minKernel": "5.10"}, "excludes": {"caps": ["CAP_SYS_ADMIN"]}}
	]
}`
	cases := []struct {
		name string
		args []uint64
		x86  string
		arm  string // when it differs
	}{
		{"mkdirat", nil, "errno 13", ""},
		{"rmdir", nil, denied, "-"},
		{"unlinkat", nil, allow, ""},
		{"personality", []uint64{0x0040000}, "errno 22", ""},
		{"personality", []uint64{0}, allow, ""},
		{"socket", []uint64{10, 1, 0}, "errno 97", ""},
		{"socket", []uint64{2, 1, 0}, allow, ""},
		{"write", []uint64{1, 0, 4097}, "log", ""},
		{"write", []uint64{1, 0, 4096}, allow, ""},
		{"read", []uint64{99, 0, 1}, "trap", ""},
		{"read", []uint64{99, 0, 0}, allow, ""},
		{"read", []uint64{98, 0, 1}, allow, ""},
		{"openat", []uint64{0, 0, 1}, denied, ""},     // O_WRONLY
		{"openat", []uint64{0, 0, 0}, allow, ""},      // O_RDONLY
		{"openat", []uint64{0, 0, 2}, allow, ""},      // O_RDWR
		{"openat", []uint64{0, 0, 0o101}, denied, ""}, // O_WRONLY|O_CREAT
		{"getpid", nil, "kill-thread", ""},
		{"getppid", nil, "kill-process", ""},
		{"gettid", nil, "kill-thread", ""},
		{"lseek", []uint64{0, 9}, denied, ""},
		{"lseek", []uint64{0, 10}, allow, ""},
		{"pread64", []uint64{0, 0, 0, 10}, denied, ""},
		{"pread64", []uint64{0, 0, 0, 11}, allow, ""},
		{"pwrite64", []uint64{0, 0, 0, 9}, allow, ""},
		{"pwrite64", []uint64{0, 0, 0, 10}, denied, ""},
		{"chmod", nil, denied, "-"},
		{"fchown", nil, allow, denied},
		{"fchownat", nil, denied, allow},
		{"sync", nil, denied, ""},
	}
	for _, tg := range []Target{x86Target, armTarget} {
		d := mustParse(t, src, tg)
		if !slices.Equal(d.Profile.Arches, []string{tg.Arch}) {
			t.Errorf("%s: arches %v", tg.Arch, d.Profile.Arches)
		}
		prog := mustCompile(t, d.Profile, tg.Arch)
		for _, c := range cases {
			want := c.x86
			if tg.Arch == ArchAarch64 && c.arm != "" {
				want = c.arm
			}
			if want == "-" {
				continue // no such system call on aarch64
			}
			if got, _ := eval(t, prog, tg.Arch, c.name, c.args...); got != want {
				t.Errorf("%s: %s%v = %s, want %s", tg.Arch, c.name, c.args, got, want)
			}
		}
	}
	d := mustParse(t, src, x86Target)
	if !slices.Equal(d.Arches, []string{"SCMP_ARCH_X86_64"}) {
		t.Errorf("listed arches %v", d.Arches)
	}
	if !slices.Equal(d.Skipped, []string{"_llseek"}) {
		t.Errorf("skipped %v", d.Skipped)
	}
	if d.Profile.Rules[0].Comment != "syscalls[0]: no directories" {
		t.Errorf("comment %q", d.Profile.Rules[0].Comment)
	}
	old := x86Target
	old.Kernel = KernelVersion{5, 4}
	prog := mustCompile(t, mustParse(t, src, old).Profile, ArchX86_64)
	if got, _ := eval(t, prog, ArchX86_64, "sync"); got != allow {
		t.Errorf("sync on 5.4 = %s, want allow (includes.minKernel 5.10)", got)
	}
}

// TestDockerErrors checks that each malformed profile is refused with the
// file, the position and the field.
func TestDockerErrors(t *testing.T) {
	const head = `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [`
	rule := func(r string) string { return head + r + "]}" }
	cases := []struct {
		name, src string
		want      []string
	}{
		{"empty", "", []string{"p.json: empty file"}},
		{"blank", " \n ", []string{"p.json: empty file"}},
		{"not JSON", "defaultAction: allow", []string{"p.json: line 1, column 1: invalid JSON: invalid character 'd'"}},
		{"trailing comma", "{\n  \"defaultAction\": \"SCMP_ACT_ALLOW\",\n  \"syscalls\": [\n    {\"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\"},\n  ]\n}",
			[]string{"p.json: line 5, column 3: invalid JSON: invalid character ']'"}},
		{"truncated", "{\n\"defaultAction\": \"SCMP_", []string{"p.json: line 2, column 24: unexpected end of file"}},
		{"trailing data", "{\"defaultAction\": \"SCMP_ACT_ALLOW\"}\n}", []string{"p.json: line 2, column 1: unexpected data after the profile"}},
		{"array", "[]", []string{"p.json: top level: want an object, got an array"}},
		{"no default", `{"syscalls": []}`, []string{"p.json: defaultAction: missing (allowed: SCMP_ACT_ALLOW"}},
		{"unknown default", `{"defaultAction": "SCMP_ACT_DENY"}`, []string{`p.json: defaultAction: unknown action "SCMP_ACT_DENY" (allowed: SCMP_ACT_ALLOW, SCMP_ACT_ERRNO`}},
		{"default trace", `{"defaultAction": "SCMP_ACT_TRACE"}`, []string{"p.json: defaultAction: SCMP_ACT_TRACE is not supported"}},
		{"default errno on allow", `{"defaultAction": "SCMP_ACT_ALLOW", "defaultErrnoRet": 1}`, []string{"p.json: defaultErrnoRet: set, but only SCMP_ACT_ERRNO"}},
		{"default errno too big", `{"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 5000}`, []string{"p.json: defaultErrnoRet: 5000 is not an integer from 0 to 4095"}},
		{"unknown field", `{"defaultAction": "SCMP_ACT_ALLOW", "syscall": []}`, []string{`p.json: syscall: unknown field, did you mean "syscalls"? (known: defaultAction`}},
		{"unrelated field", `{"defaultAction": "SCMP_ACT_ALLOW", "rules": []}`, []string{`p.json: rules: unknown field (known: defaultAction`}},
		{"val for value", rule(`{"names": ["openat"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 2, "val": 1, "op": "SCMP_CMP_EQ"}]}`),
			[]string{`p.json: syscalls[0].args[0].val: unknown field, did you mean "value"?`}},
		{"duplicate key", "{\"defaultAction\": \"SCMP_ACT_ERRNO\",\n \"defaultAction\": \"SCMP_ACT_ALLOW\"}",
			[]string{`p.json: line 2, column 2: defaultAction: the key is given twice in one object (first at line 1, column 2)`}},
		{"duplicate nested key", rule(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "action": "SCMP_ACT_ERRNO"}`),
			[]string{`syscalls[0].action: the key is given twice in one object`}},
		{"unknown arch", `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_65"]}`, []string{`p.json: architectures[0]: unknown architecture "SCMP_ARCH_X86_65"`}},
		{"arches and archMap", `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": [], "archMap": []}`, []string{"p.json: archMap: both architectures and archMap are set"}},
		{"archMap entry", `{"defaultAction": "SCMP_ACT_ALLOW", "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["x86"]}]}`, []string{`p.json: archMap[0].subArchitectures[0]: unknown architecture "x86"`}},
		{"unknown flag", `{"defaultAction": "SCMP_ACT_ALLOW", "flags": ["SECCOMP_FILTER_FLAG_FAST"]}`, []string{`p.json: flags[0]: unknown flag "SECCOMP_FILTER_FLAG_FAST"`}},
		{"listener", `{"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/run/l.sock"}`, []string{"p.json: listenerPath: seccomp notification (SCMP_ACT_NOTIFY) is not supported"}},
		{"syscalls object", `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": {}}`, []string{"p.json: syscalls: want an array, got an object"}},
		{"conflicting plain rules", rule(`{"names": ["mkdir", "read"], "action": "SCMP_ACT_ALLOW"}, {"names": ["mkdir"], "action": "SCMP_ACT_ERRNO"}, {"names": ["read"], "action": "SCMP_ACT_ALLOW"}, {"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 1, "op": "SCMP_CMP_EQ"}]}`),
			[]string{`p.json: syscalls[1]: mkdir is also in syscalls[0], with another action (allow there, errno here): with no conditions on either, only the first would apply; keep one`}},
		{"unknown syscall", rule(`{"names": ["read"], "action": "SCMP_ACT_ALLOW"}, {"names": ["read"], "action": "SCMP_ACT_ALLOW"}, {"names": ["mkdri"], "action": "SCMP_ACT_ERRNO"}`),
			[]string{`p.json: syscalls[2].names[0]: unknown system call "mkdri"`}},
		{"unknown action", rule(`{"names": ["read"], "action": "SCMP_ACT_ALLOW"}, {"names": ["read"], "action": "SCMP_ACT_FOO"}`),
			[]string{`p.json: syscalls[1].action: unknown action "SCMP_ACT_FOO" (allowed: SCMP_ACT_ALLOW, SCMP_ACT_ERRNO, SCMP_ACT_KILL, SCMP_ACT_KILL_PROCESS, SCMP_ACT_KILL_THREAD, SCMP_ACT_TRAP, SCMP_ACT_LOG)`}},
		{"trace", rule(`{"names": ["read"], "action": "SCMP_ACT_TRACE"}`), []string{"p.json: syscalls[0].action: SCMP_ACT_TRACE is not supported"}},
		{"notify", rule(`{"names": ["read"], "action": "SCMP_ACT_NOTIFY"}`), []string{"p.json: syscalls[0].action: SCMP_ACT_NOTIFY is not supported"}},
		{"no action", rule(`{"names": ["read"]}`), []string{"p.json: syscalls[0].action: missing"}},
		{"no names", rule(`{"action": "SCMP_ACT_ALLOW"}`), []string{"p.json: syscalls[0]: no names"}},
		{"empty names", rule(`{"names": [], "action": "SCMP_ACT_ALLOW"}`), []string{"p.json: syscalls[0].names: empty"}},
		{"name and names", rule(`{"name": "read", "names": ["read"], "action": "SCMP_ACT_ALLOW"}`), []string{"p.json: syscalls[0]: both name and names are set"}},
		{"names not strings", rule(`{"names": ["read", 3], "action": "SCMP_ACT_ALLOW"}`), []string{"p.json: syscalls[0].names[1]: want a string, got the number 3"}},
		{"errno zero", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "errnoRet": 0}`), []string{"p.json: syscalls[0].errnoRet: 0 would make the system call return success"}},
		{"errno negative", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "errnoRet": -1}`), []string{"p.json: syscalls[0].errnoRet: -1 is not an integer from 0 to 4095"}},
		{"errno on allow", rule(`{"names": ["read"], "action": "SCMP_ACT_ALLOW", "errnoRet": 1}`), []string{"p.json: syscalls[0].errnoRet: set, but only SCMP_ACT_ERRNO"}},
		{"index", rule(`{"names": ["read"], "action": "SCMP_ACT_ALLOW"}, {"names": ["read"], "action": "SCMP_ACT_ALLOW"}, {"names": ["read"], "action": "SCMP_ACT_ALLOW"}, {"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 7, "value": 1, "op": "SCMP_CMP_EQ"}]}`),
			[]string{"p.json: syscalls[3].args[0].index: 7 is above 5"}},
		{"no index", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": [{"value": 1, "op": "SCMP_CMP_EQ"}]}`), []string{"p.json: syscalls[0].args[0].index: missing"}},
		{"index string", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": [{"index": "0", "op": "SCMP_CMP_EQ"}]}`), []string{`p.json: syscalls[0].args[0].index: want a number, got "0"`}},
		{"unknown op", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_IN"}]}`), []string{`p.json: syscalls[0].args[0].op: unknown operator "SCMP_CMP_IN" (allowed: SCMP_CMP_NE`}},
		{"no op", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 1}]}`), []string{"p.json: syscalls[0].args[0].op: missing"}},
		{"value too big", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 18446744073709551616, "op": "SCMP_CMP_EQ"}]}`), []string{"p.json: syscalls[0].args[0].value: 18446744073709551616 is not an integer"}},
		{"value float", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 1.5, "op": "SCMP_CMP_EQ"}]}`), []string{"p.json: syscalls[0].args[0].value: 1.5 is not an integer"}},
		{"valueTwo without MASKED_EQ", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 1, "valueTwo": 2, "op": "SCMP_CMP_EQ"}]}`), []string{"p.json: syscalls[0].args[0].valueTwo: set, but only SCMP_CMP_MASKED_EQ"}},
		{"misspelt args", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "arg": []}`), []string{"p.json: syscalls[0].arg: unknown field"}},
		{"args object", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": {}}`), []string{"p.json: syscalls[0].args: want an array, got an object"}},
		{"includes arch", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "includes": {"arches": ["x86_64"]}}`), []string{`p.json: syscalls[0].includes.arches[0]: unknown architecture "x86_64" (Docker's names: x86, amd64`}},
		{"includes cap", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "includes": {"caps": ["sys_admin"]}}`), []string{`p.json: syscalls[0].includes.caps[0]: "sys_admin" is not a capability name`}},
		{"min kernel", rule(`{"names": ["read"], "action": "SCMP_ACT_ERRNO", "excludes": {"minKernel": "4.8.1"}}`), []string{`p.json: syscalls[0].excludes.minKernel: "4.8.1" is not a kernel version like "4.8"`}},
		{"unknown name in a rule left out", rule(`{"names": ["read", "frob"], "action": "SCMP_ACT_ERRNO", "includes": {"caps": ["CAP_SYS_ADMIN"]}}`), []string{`p.json: syscalls[0].names[1]: unknown system call "frob"`}},
		{"several", rule(`{"names": ["mkdri"], "action": "SCMP_ACT_FOO", "args": [{"index": 6, "op": "SCMP_CMP_EQ"}]}`),
			[]string{`p.json: syscalls[0].names[0]: unknown system call "mkdri"`, `p.json: syscalls[0].action: unknown action "SCMP_ACT_FOO"`, "p.json: syscalls[0].args[0].index: 6 is above 5"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseDocker("p.json", []byte(c.src), x86Target)
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain %q", err, w)
				}
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "p.json: ") {
					t.Errorf("error line %q does not name the file", line)
				}
			}
		})
	}
}

func TestDockerManyErrorsAreCut(t *testing.T) {
	var rules []string
	for range 30 {
		rules = append(rules, `{"names": ["frob"], "action": "SCMP_ACT_ALLOW"}`)
	}
	_, err := ParseDocker("p.json", []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [`+strings.Join(rules, ",")+`]}`), x86Target)
	if err == nil || strings.Count(err.Error(), "\n") != 20 || !strings.Contains(err.Error(), "and 10 more problems") {
		t.Errorf("error:\n%v", err)
	}
}

func TestLoadDocker(t *testing.T) {
	if NativeArch() == "" {
		t.Skip("no seccomp filters for this architecture")
	}
	path := "/w/p.json"
	p, err := LoadDocker(path, []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rules) != 1 || p.Rules[0].Errno != 13 || !slices.Equal(p.Arches, []string{NativeArch()}) {
		t.Errorf("profile %+v", p)
	}
	if _, err := LoadDocker(path, []byte(`{"defaultAction": "SCMP_ACT_ALLOW",`)); err == nil || !strings.HasPrefix(err.Error(), path+": line 1, column 36") {
		t.Errorf("truncated file: %v", err)
	}
	if _, err := LoadDocker("d.json", dockerDefault(t)); err != nil {
		t.Errorf("Docker's default profile on this host: %v", err)
	}
}

// FuzzLoadDocker checks that the loader never panics, and that what it
// accepts compiles and can be summarised. The seeds in testdata/fuzz run as
// ordinary tests.
func FuzzLoadDocker(f *testing.F) {
	f.Add(dockerDefault(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, tg := range []Target{x86Target, armTarget} {
			d, err := ParseDocker("f.json", data, tg)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "f.json: ") {
					t.Fatalf("error without the file name: %v", err)
				}
				continue
			}
			if _, err := Compile(d.Profile, tg.Arch); err != nil {
				if strings.Contains(err.Error(), "kernel's limit") {
					continue
				}
				t.Fatalf("accepted profile does not compile: %v", err)
			}
			if _, err := Summarize(d.Profile, tg.Arch); err != nil {
				t.Fatalf("summarize: %v", err)
			}
		}
	})
}

// TestDockerNestingBounded: a profile nested deeper than any profile needs
// is refused, as is reading one whose long keys would make every path
// below them as long: a file of 9,000 brackets, or a 300 KB key over
// 100,000 elements, took hundreds of megabytes (found by a tester). The
// control: a Docker profile's own four levels are read.
func TestDockerNestingBounded(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 9000) + "1" + strings.Repeat("}", 9000)
	if _, err := ParseDocker("p.json", []byte(deep), x86Target); err == nil || !strings.Contains(err.Error(), "nested more than 32 levels") {
		t.Errorf("9000 levels: %v", err)
	}
	long := `{"defaultAction": "SCMP_ACT_ALLOW", "` + strings.Repeat("b", 300000) + `": [` + strings.Repeat("1,", 100000) + `1]}`
	_, err := ParseDocker("p.json", []byte(long), x86Target)
	if err == nil || !strings.Contains(err.Error(), "unknown field") || len(err.Error()) > 4096 {
		t.Errorf("a long key: %.300v", err)
	}
	ok := `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]}]}`
	if _, err := ParseDocker("p.json", []byte(ok), x86Target); err != nil {
		t.Errorf("control: %v", err)
	}
}
