//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/sandbox"
)

func TestSeccompCheck(t *testing.T) {
	if sandbox.SeccompNativeArch() == "" {
		t.Skip("no seccomp filters for this architecture")
	}
	dir := t.TempDir()
	docker, err := filepath.Abs("../../internal/seccomp/testdata/docker-default.json")
	if err != nil {
		t.Fatal(err)
	}
	custom := filepath.Join(dir, "custom.json")
	os.WriteFile(custom, []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
		{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13},
		{"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 97, "args": [{"index": 0, "value": 10, "op": "SCMP_CMP_EQ"}]},
		{"names": ["reboot"], "action": "SCMP_ACT_KILL_PROCESS"}
	]}`), 0o644)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
		{"names": ["mkdri"], "action": "SCMP_ACT_ERRNO"},
		{"names": ["read"], "action": "SCMP_ACT_FOO", "args": [{"index": 7, "value": 0, "op": "SCMP_CMP_EQ"}]}
	]}`), 0o644)
	broken := filepath.Join(dir, "broken.json")
	os.WriteFile(broken, []byte("{\n  \"defaultAction\": \"SCMP_ACT_ALLOW\"\n  \"syscalls\": []\n}\n"), 0o644)

	cases := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"docker default", []string{"check", docker}, 0, []string{
			"a valid Docker-format profile", "default action: errno EPERM", "(the file lists SCMP_ARCH_",
			"denied (ENOSYS 1, EPERM", "clone: allow if arg0 & 0x7e020000 == 0; else errno EPERM",
			"this profile allows what moat's floor refuses: ioctl TIOCSTI, ioctl TIOCLINUX, MPTCP sockets (IPv4), MPTCP sockets (IPv6)",
			"The floor stays in force under it", "rules whose conditions do not hold in moat's sandbox (no capabilities"}, nil},
		{"verbose", []string{"check", "-v", docker}, 0, []string{"left out: syscalls[44] (bpf, clone, clone3", "includes.caps CAP_SYS_ADMIN", "skipped: "}, nil},
		{"other arch", []string{"check", "--arch", "aarch64", docker}, 0, []string{"on aarch64:", "SCMP_ARCH_AARCH64, SCMP_ARCH_ARM"}, nil},
		{"custom", []string{"check", custom}, 0, []string{"default action: allow", "denied (EACCES 2)", "1 killed",
			"socket: errno EAFNOSUPPORT if arg0 == 10; else allow",
			"allows what moat's floor refuses: unshare, setns, clone3"}, nil},
		{"default", []string{"check", "default"}, 0, []string{"moat's default profile", "default action: allow",
			"ioctl: errno EPERM if arg1 in {0x5412, 0x541c}; else allow", "refuses everything moat's floor refuses, and runs alone"}, nil},
		{"strict", []string{"check", "strict"}, 0, []string{"moat's strict profile", "default action: errno EPERM",
			"refuses everything moat's floor refuses, and runs alone"}, nil},
		{"bad", []string{"check", bad}, 125, nil, []string{
			bad + `: syscalls[0].names[0]: unknown system call "mkdri"`,
			bad + `: syscalls[1].action: unknown action "SCMP_ACT_FOO" (allowed: SCMP_ACT_ALLOW`,
			bad + `: syscalls[1].args[0].index: 7 is above 5`}},
		{"broken", []string{"check", broken}, 125, nil, []string{broken + ": line 3, column 3: invalid JSON: invalid character '\"' after object key:value pair"}},
		{"missing", []string{"check", filepath.Join(dir, "none.json")}, 125, nil, []string{"none.json: no such file"}},
		{"bad arch", []string{"check", "--arch", "riscv64", "default"}, 125, nil, []string{`not "riscv64"`}},
		{"no file", []string{"check"}, 2, nil, []string{"usage: moat seccomp check"}},
		{"no subcommand", nil, 2, nil, []string{"usage: moat seccomp check"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := moat(t, dir, append([]string{"seccomp"}, c.args...)...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, out, errs)
			}
			for _, w := range c.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range c.stderr {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
		})
	}
}
