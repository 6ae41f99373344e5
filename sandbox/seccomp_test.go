//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/internal/seccomp"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// runWithProfile runs args in a real sandbox whose workspace is ws, under
// the default policy with syscalls.profile set to profile.
func runWithProfile(t *testing.T, ws, profile string, args ...string) result {
	t.Helper()
	return run(t, ws, func(p *policy.Policy) {
		p.Syscalls.Profile = profile
		p.Limits.Wall = policy.Duration(2 * time.Minute)
	}, args...)
}

func shWithProfile(t *testing.T, ws, profile, script string) result {
	t.Helper()
	return runWithProfile(t, ws, profile, "/bin/sh", "-c", script)
}

// writeProfile writes a JSON profile to a file outside the workspace and
// returns its path.
func writeProfile(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func dockerDefaultProfile(t *testing.T) string {
	t.Helper()
	path, err := filepath.Abs("../internal/seccomp/testdata/docker-default.json")
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCommonToolsWorkUnderProfiles runs the everyday work of an agent's
// tools under the strict profile and under Docker's default profile (with
// moat's floor under it).
func TestCommonToolsWorkUnderProfiles(t *testing.T) {
	cases := []struct{ tool, script string }{
		{"git", `git init -q repo && cd repo && echo hi > f && git add f && git -c user.email=a@b -c user.name=a commit -qm first && git log --oneline | grep -q first`},
		{"gcc", `printf '#include <stdio.h>\nint main(void){puts("compiled");return 0;}\n' > h.c && gcc -o h h.c && ./h`},
		{"python3", `python3 -c 'import json, subprocess, threading, multiprocessing; print(json.dumps(subprocess.check_output(["echo", "py"]).decode())); print(multiprocessing.Pool(2).map(abs, [-1, -2]))'`},
		{"go", `mkdir -p gomod && cd gomod && printf 'module hello\n\ngo 1.21\n' > go.mod && printf 'package main\nimport "fmt"\nfunc main(){fmt.Println("gobuilt")}\n' > main.go && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -o hello . && ./hello`},
		{"node", `node -e 'console.log(require("os").platform()); require("child_process").execSync("true"); require("fs").writeFileSync("n.txt", "x")'`},
		{"make", `printf 'all:\n\techo made\n' > Makefile && make -s`},
		{"curl", `curl --version >/dev/null`},
		{"pip3", `pip3 --version >/dev/null`},
		{"bash", `bash -c 'for i in 1 2 3; do echo $i; done | sort -r | head -1 | grep -q 3 && ls -la / >/dev/null && tar cf /tmp/x.tar . && sha256sum /tmp/x.tar >/dev/null && cp /tmp/x.tar y.tar && chmod 600 y.tar && mv y.tar z.tar && rm z.tar && find / -maxdepth 2 >/dev/null 2>&1; date >/dev/null; sleep 0.1'`},
	}
	for _, profile := range []string{policy.ProfileStrict, "docker-default"} {
		t.Run(profile, func(t *testing.T) {
			path := profile
			if profile == "docker-default" {
				path = dockerDefaultProfile(t)
			}
			for _, c := range cases {
				t.Run(c.tool, func(t *testing.T) {
					if _, err := exec.LookPath(c.tool); err != nil {
						t.Skipf("%s is not installed on this host", c.tool)
					}
					ws := t.TempDir()
					r := shWithProfile(t, ws, path, c.script)
					if r.err != nil || r.rep.ExitCode != 0 {
						t.Fatalf("%s failed under %s (exit %d, %v):\n%s%s", c.tool, profile, r.rep.ExitCode, r.err, r.stdout, r.stderr)
					}
				})
			}
		})
	}
}

// TestCustomProfileErrno: a profile denying mkdir with errnoRet 13 makes
// mkdir fail with EACCES, and leaves touch alone.
func TestCustomProfileErrno(t *testing.T) {
	path := writeProfile(t, `{
	"defaultAction": "SCMP_ACT_ALLOW",
	"syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]
}`)
	ws := t.TempDir()
	r := shWithProfile(t, ws, path, `grep Seccomp_filters: /proc/self/status; mkdir d; echo mkdir=$?; touch f && echo touched`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stderr, "Permission denied") || !strings.Contains(r.stdout, "mkdir=1") {
		t.Errorf("mkdir did not fail with EACCES:\n%s%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "touched") {
		t.Errorf("touch failed:\n%s%s", r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "d")); err == nil {
		t.Error("the directory was made")
	}
	if _, err := os.Stat(filepath.Join(ws, "f")); err != nil {
		t.Errorf("touch did not create f: %v", err)
	}
	// The custom profile and the floor.
	if !strings.Contains(r.stdout, "Seccomp_filters:\t2") {
		t.Errorf("want two filters on the command:\n%s", r.stdout)
	}
}

// TestCustomProfileArguments: rules with argument conditions apply only to
// the calls they describe.
func TestCustomProfileArguments(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed on this host")
	}
	path := writeProfile(t, `{
	"defaultAction": "SCMP_ACT_ALLOW",
	"syscalls": [
		{"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 97,
		 "args": [{"index": 0, "value": 10, "op": "SCMP_CMP_EQ"}]},
		{"names": ["personality"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
		 "args": [{"index": 0, "value": 262144, "op": "SCMP_CMP_EQ"}]}
	]
}`)
	ws := t.TempDir()
	r := shWithProfile(t, ws, path, `python3 -c '
import socket
for fam, name in [(socket.AF_INET, "inet"), (socket.AF_INET6, "inet6"), (socket.AF_UNIX, "unix")]:
    try:
        socket.socket(fam, socket.SOCK_STREAM).close()
        print(name, "ok")
    except OSError as e:
        print(name, e.errno)
'
if setarch "$(uname -m)" -R true 2>/dev/null; then echo setarch-R ok; else echo setarch-R refused; fi
if setarch "$(uname -m)" true; then echo setarch ok; fi`)
	mustExit(t, r, 0)
	for _, want := range []string{"inet ok", "inet6 97", "unix ok", "setarch-R refused", "setarch ok"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("want %q in:\n%s%s", want, r.stdout, r.stderr)
		}
	}
}

// TestFloorUnderDockerProfile: Docker's default profile allows TIOCSTI,
// MPTCP sockets and ptrace; moat's floor refuses them anyway, and new user
// namespaces.
func TestFloorUnderDockerProfile(t *testing.T) {
	ws := t.TempDir()
	script := `grep Seccomp_filters: /proc/self/status
if e=$(unshare -r true 2>&1); then echo ESCAPED-unshare; else echo "unshare refused: $e"; fi
python3 -c '
import socket, ctypes, os
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
    print("ESCAPED-mptcp")
except OSError as e:
    print("mptcp", e.errno)
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.ptrace(16, os.getppid(), 0, 0)
print("ptrace", ctypes.get_errno() if rc != 0 else "ESCAPED")
'`
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed on this host")
	}
	r := shWithProfile(t, ws, dockerDefaultProfile(t), script)
	mustExit(t, r, 0)
	if strings.Contains(r.stdout, "ESCAPED") {
		t.Errorf("the floor did not hold:\n%s%s", r.stdout, r.stderr)
	}
	for _, want := range []string{"Seccomp_filters:\t2", "unshare refused: unshare: unshare failed: Operation not permitted", "mptcp 1", "ptrace 1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q in:\n%s%s", want, r.stdout, r.stderr)
		}
	}
}

// TestFloorRefusesKeyrings: the kernel's keyrings are not namespaced, and
// the command starts in its caller's session keyring, whose keys it would
// possess: under a profile that allows every call the floor still refuses
// keyctl, add_key and request_key. The control: with no filter at all
// (unconfined) the same probe reaches the session keyring (it adds its
// key to a thread keyring of its own, not to the caller's).
func TestFloorRefusesKeyrings(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed on this host")
	}
	script := `python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nr = {"x86_64": (250, 248, 249), "aarch64": (219, 217, 218)}[os.uname().machine]
L = ctypes.c_long
for name, args in [("keyctl", (nr[0], L(0), L(-3), L(0))),
                   ("add_key", (nr[1], b"user", b"moat-probe", b"x", L(1), L(-1))),
                   ("request_key", (nr[2], b"user", b"moat-probe", None, L(0)))]:
    rc = libc.syscall(*args)
    print(name, "allowed" if rc >= 0 else ctypes.get_errno())
'`
	allowAll := writeProfile(t, `{"defaultAction": "SCMP_ACT_ALLOW"}`)
	r := shWithProfile(t, t.TempDir(), allowAll, script)
	mustExit(t, r, 0)
	for _, want := range []string{"keyctl 1\n", "add_key 1\n", "request_key 1\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("allow-all profile: want %q (EPERM) in:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	r = shWithProfile(t, t.TempDir(), policy.ProfileUnconfined, script)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "keyctl allowed\n") || !strings.Contains(r.stdout, "add_key allowed\n") {
		t.Errorf("control: unconfined, the probe did not reach the session keyring:\n%s%s", r.stdout, r.stderr)
	}
}

// TestCustomProfileWeakeningWarned: a custom profile that lets through
// what moat's default profile refuses is warned of, naming those calls,
// as unconfined is (an allow-all profile started without a word, found by
// a tester); the controls: the default and strict profiles, which have no
// such gaps, are not.
func TestCustomProfileWeakeningWarned(t *testing.T) {
	allowAll := writeProfile(t, `{"defaultAction": "SCMP_ACT_ALLOW"}`)
	for profile, want := range map[string]bool{allowAll: true, policy.ProfileDefault: false, policy.ProfileStrict: false} {
		r := runWithProfile(t, t.TempDir(), profile, "/bin/true")
		mustExit(t, r, 0)
		var warned string
		for _, w := range r.rep.Warnings {
			if strings.Contains(w, "allows what moat's default profile refuses") {
				warned = w
			}
		}
		if (warned != "") != want || want && !strings.Contains(warned, "mount") {
			t.Errorf("%s: warnings %q, want the weakening warned of: %v", profile, r.rep.Warnings, want)
		}
	}
}

// TestMalformedProfilesRefused: a bad profile stops the run before the
// command starts, with the file and the position in the error, as an
// error of the policy's syscalls.profile with one problem a line (they
// were joined by a newline moat's output escaped, and named no policy
// field).
func TestMalformedProfilesRefused(t *testing.T) {
	cases := []struct {
		name, src string
		want      string // after the file name
	}{
		{"invalid JSON", "{\n  \"defaultAction\": \"SCMP_ACT_ALLOW\",\n  \"syscalls\": [,]\n}", ": line 3, column 16: invalid JSON"},
		{"unknown syscall", `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdri"], "action": "SCMP_ACT_ERRNO"}]}`,
			`: syscalls[0].names[0]: unknown system call "mkdri"`},
		{"unknown action", `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"}, {"names": ["mkdir"], "action": "SCMP_ACT_FOO"}]}`,
			`: syscalls[1].action: unknown action "SCMP_ACT_FOO"`},
		{"index above 5", `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 7, "value": 0, "op": "SCMP_CMP_EQ"}]}]}`,
			`: syscalls[0].args[0].index: 7 is above 5`},
		{"trace", `{"defaultAction": "SCMP_ACT_TRACE"}`, `: defaultAction: SCMP_ACT_TRACE is not supported`},
		{"no default action", `{"syscalls": []}`, `: defaultAction: missing`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeProfile(t, c.src)
			ws := t.TempDir()
			r := shWithProfile(t, ws, path, "echo SHOULD-NOT-RUN; touch ran")
			// The policy's field, then the file's problems a line each.
			want := "syscalls.profile: " + path + ":\n  " + strings.TrimPrefix(c.want, ": ")
			if r.err == nil || !strings.Contains(r.err.Error(), want) {
				t.Errorf("err %v, want it to contain %q", r.err, want)
			}
			if r.rep.ExitCode != 125 || strings.Contains(r.stdout, "SHOULD") {
				t.Errorf("exit %d, stdout %q: the command ran", r.rep.ExitCode, r.stdout)
			}
			if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
				t.Error("the command ran")
			}
		})
	}
	r := shWithProfile(t, t.TempDir(), "/nonexistent/profile.json", "echo SHOULD-NOT-RUN")
	if r.err == nil || !strings.Contains(r.err.Error(), "/nonexistent/profile.json") || strings.Contains(r.stdout, "SHOULD") {
		t.Errorf("missing profile: err %v stdout %q", r.err, r.stdout)
	}
}

// probeCall is one attempt of a refused system call by the probe program.
type probeCall struct {
	label string
	name  string
	args  []string // Go expressions of type uintptr in the probe's main
}

// deniedProbes are the system calls the default profile refuses, each with
// arguments that would otherwise be valid, or harmlessly invalid where
// success would disturb the test (a clone that would fork the probe).
// str("x") is a pointer to a C string, buf a zeroed 4 KiB buffer, fd a file
// of the probe's.
func deniedProbes() []probeCall {
	const atFdcwd = "atFdcwd"
	p := func(name string, args ...string) probeCall { return probeCall{name, name, args} }
	calls := []probeCall{
		p("mount", `str("none")`, `str("/tmp")`, `str("tmpfs")`, "0", "0"),
		p("umount2", `str("/tmp")`, "0"),
		p("pivot_root", `str("/tmp")`, `str("/tmp")`),
		p("chroot", `str("/tmp")`),
		p("move_mount", atFdcwd, `str("/tmp")`, atFdcwd, `str("/home")`, "0"),
		p("open_tree", atFdcwd, `str("/tmp")`, "1"),
		p("fsopen", `str("tmpfs")`, "0"),
		p("fsconfig", "fd", "0", "0", "0", "0"),
		p("fsmount", "fd", "0", "0"),
		p("fspick", atFdcwd, `str("/tmp")`, "0"),
		p("mount_setattr", atFdcwd, `str("/tmp")`, "0", "buf", "32"),
		p("open_tree_attr", atFdcwd, `str("/tmp")`, "0", "0", "0"), // Linux 6.15: open_tree with attributes
		p("unshare", "0x10000000"),
		p("setns", "fd", "0"),
		p("clone3", "0", "0"), // a zero size is invalid: a real clone3 would fork the probe
		p("ptrace", "16", "1"),
		p("process_vm_readv", "self", "0", "0", "0", "0", "0"),
		p("process_vm_writev", "self", "0", "0", "0", "0", "0"),
		p("kcmp", "self", "self", "0", "1", "1"),
		p("bpf", "0", "buf", "72"),
		p("perf_event_open", "buf", "0", "^uintptr(0)", "^uintptr(0)", "0"),
		p("userfaultfd", "0"),
		p("io_uring_setup", "1", "buf"),
		p("io_uring_enter", "fd", "0", "0", "0", "0", "0"),
		p("io_uring_register", "fd", "0", "0", "0"),
		p("keyctl", "0", "^uintptr(2)", "0"), // KEYCTL_GET_KEYRING_ID of the session keyring
		p("add_key", `str("user")`, `str("moat")`, "buf", "4", "^uintptr(2)"),
		p("request_key", `str("user")`, `str("moat")`, "0", "0"),
		p("kexec_load", "0", "0", "0", "0"),
		p("kexec_file_load", "fd", "fd", "0", "0", "0"),
		p("init_module", "buf", "0", "buf"),
		p("finit_module", "fd", "buf", "0"),
		p("delete_module", `str("moat")`, "0"),
		p("open_by_handle_at", atFdcwd, "buf", "0"),
		p("name_to_handle_at", atFdcwd, `str("/tmp")`, "buf", "buf", "0"),
		{"personality(ADDR_NO_RANDOMIZE)", "personality", []string{"0x0040000"}},
		p("acct", "0"),
		p("swapon", `str("/tmp/swap")`, "0"),
		p("swapoff", `str("/tmp/swap")`),
		p("reboot", "0", "0", "0", "0"), // wrong magic: EINVAL were it allowed
		p("syslog", "3", "buf", "4096"),
		p("settimeofday", "0", "0"),
		p("clock_settime", "0", "0"),
		p("clock_adjtime", "0", "buf"),
		p("adjtimex", "buf"),
		p("quotactl", "0", "0", "0", "0"),
		p("quotactl_fd", "fd", "0", "0", "0"),
		p("iopl", "0"),
		p("ioperm", "0", "0", "0"),
		p("lookup_dcookie", "0", "buf", "0"),
		p("vhangup"),
		{"socket(AF_PACKET)", "socket", []string{"17", "3", "0x300"}},
		{"socket(AF_VSOCK)", "socket", []string{"40", "1", "0"}},
		{"socket(AF_NETLINK, NETLINK_AUDIT)", "socket", []string{"16", "3", "9"}},
		{"socket(AF_INET, SOCK_RAW)", "socket", []string{"2", "3", "1"}},
		{"socket(AF_INET6, SOCK_RAW)", "socket", []string{"10", "0x80003", "58"}},
		{"socket(AF_INET, MPTCP)", "socket", []string{"2", "1", "262"}},
		{"socket(AF_INET6, MPTCP)", "socket", []string{"10", "1", "262"}},
		{"chmod u+s", "chmod", []string{`str(file)`, "0o4755"}},
		{"fchmod g+s", "fchmod", []string{"fd", "0o2755"}},
		{"fchmodat u+s", "fchmodat", []string{atFdcwd, `str(file)`, "0o4755", "0"}},
		{"fchmodat2 g+s", "fchmodat2", []string{atFdcwd, `str(file)`, "0o2755", "0"}},
		{"open O_CREAT u+s", "open", []string{`str(file + ".open")`, "0o101", "0o4755"}},
		{"openat O_CREAT g+s", "openat", []string{atFdcwd, `str(file + ".openat")`, "0o101", "0o2755"}},
		{"creat u+s", "creat", []string{`str(file + ".creat")`, "0o4755"}},
		{"mknod S_IFREG u+s", "mknod", []string{`str(file + ".mknod")`, "0o104755", "0"}},
		{"mknodat S_IFREG g+s", "mknodat", []string{atFdcwd, `str(file + ".mknodat")`, "0o102755", "0"}},
		{"openat2", "openat2", []string{atFdcwd, `str(file + ".openat2")`, "buf", "24"}},
		{"ioctl TIOCSTI", "ioctl", []string{"0", "0x5412", "buf"}},
		{"ioctl TIOCLINUX", "ioctl", []string{"0", "0x541c", "buf"}},
	}
	// clone with each namespace flag, plus CLONE_SIGHAND without CLONE_VM,
	// which the kernel refuses (EINVAL) were the filter to let it through.
	for _, f := range []struct {
		name string
		flag string
	}{{"NEWNS", "0x20000"}, {"NEWUTS", "0x4000000"}, {"NEWIPC", "0x8000000"}, {"NEWUSER", "0x10000000"},
		{"NEWPID", "0x20000000"}, {"NEWNET", "0x40000000"}, {"NEWCGROUP", "0x2000000"}, {"NEWTIME", "0x80"}} {
		calls = append(calls, probeCall{"clone(CLONE_" + f.name + ")", "clone", []string{f.flag + "|0x800", "0", "0", "0", "0"}})
	}
	return calls
}

// TestDefaultProfileDeniedCalls has a small static program
// (testdata/seccompprobe) attempt each system call the default profile
// refuses, runs it in a real sandbox,
// and checks that every one got EPERM (clone3 and openat2: ENOSYS) and that
// the sandbox kept running.
func TestDefaultProfileDeniedCalls(t *testing.T) {
	arch := seccomp.NativeArch()
	if arch == "" {
		t.Skipf("no seccomp filters for %s", runtime.GOARCH)
	}

	// Every refused name of the default profile has a probe.
	probes := deniedProbes()
	probed := map[string]bool{}
	for _, c := range probes {
		probed[c.name] = true
	}
	for _, r := range seccomp.Default().Rules {
		if r.Action == seccomp.Allow {
			continue
		}
		for _, n := range r.Names {
			if _, ok := seccomp.Lookup(arch, n); ok && !probed[n] {
				t.Errorf("the default profile refuses %s, and no probe tries it", n)
			}
		}
	}

	var specs []string
	want := map[string]string{}
	for _, c := range probes {
		nr, ok := seccomp.Lookup(arch, c.name)
		if !ok {
			continue // iopl, chmod, ... exist on x86_64 only
		}
		spec := []string{c.label, fmt.Sprint(nr)}
		for _, a := range c.args {
			spec = append(spec, probeArg(t, a))
		}
		specs = append(specs, strings.Join(spec, "\t"))
		want[c.label] = "1" // EPERM
		if c.name == "clone3" || c.name == "openat2" {
			want[c.label] = "38" // ENOSYS
		}
	}
	ws := t.TempDir()
	bin := filepath.Join(ws, "probe")
	seccompProbe(t, bin)

	r := runWithProfile(t, ws, policy.ProfileDefault, append([]string{bin}, specs...)...)
	mustExit(t, r, 0)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	for label, w := range want {
		if got[label] != w {
			t.Errorf("%s: errno %s, want %s", label, got[label], w)
		}
	}
	if !strings.HasPrefix(got["mode"], "-") {
		t.Errorf("the probe's file has mode %q: a set-id bit got through", got["mode"])
	}
	for k, w := range map[string]string{"exec": "<nil>", "alive": "yes"} {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	if t.Failed() {
		t.Logf("probe output:\n%s%s", r.stdout, r.stderr)
	}
}

// TestStrictProfileRefusesUnlisted: under strict, one filter is in force
// and a call the allow-list does not name fails with EPERM.
func TestStrictProfileRefusesUnlisted(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed on this host")
	}
	ws := t.TempDir()
	r := shWithProfile(t, ws, policy.ProfileStrict, `grep Seccomp_filters: /proc/self/status
python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, args in [("msgget", (0, 0o1600)), ("vmsplice", (1, 0, 0, 0)), ("unshare", (0x10000000,))]:
    rc = getattr(libc, name)(*args)
    print(name, ctypes.get_errno() if rc == -1 else "ALLOWED")
'`)
	mustExit(t, r, 0)
	for _, want := range []string{"Seccomp_filters:\t1", "msgget 1", "vmsplice 1", "unshare 1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q in:\n%s%s", want, r.stdout, r.stderr)
		}
	}
}

// setidRoutes is run in a sandbox with its workspace as the working
// directory and a set-id program of the host as $1 (or "" if the host has
// none). It tries every way a command could leave a set-id file in the
// workspace, one "route=result" line each: an errno name, "ok", or a
// tool's exit status. shared is a setgid directory the host made.
const setidRoutes = `umask 0
python3 - "$1" <<'PY'
import ctypes, errno, os, stat, sys
suid = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
def t(label, f):
    try:
        f()
        print(label + "=ok")
    except OSError as e:
        print(label + "=" + errno.errorcode.get(e.errno, str(e.errno)))
def c0(rc):
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return rc
def c(rc):
    os.close(c0(rc))
def tmpfile(mode, chmod):
    fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, mode)
    try:
        if chmod:
            os.fchmod(fd, chmod)
        # linkat with AT_SYMLINK_FOLLOW: os.link would call link(2),
        # which links the /proc symlink itself.
        c0(libc.linkat(-100, b"/proc/self/fd/%d" % fd, -100, b"tmpfile-%o-%o" % (mode, chmod), 0x400))
    finally:
        os.close(fd)
def openat2(path, mode):
    how = (ctypes.c_uint64 * 3)(os.O_CREAT | os.O_WRONLY, mode, 0)
    c(libc.syscall(437, -100, path.encode(), ctypes.byref(how), 24))
def plain(name):
    os.close(os.open(name, os.O_CREAT | os.O_WRONLY, 0o755))
    return name
t("open 06755", lambda: os.close(os.open("open-6755", os.O_CREAT | os.O_WRONLY, 0o6755)))
t("open 02755", lambda: os.close(os.open("open-2755", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o2755)))
t("creat 04755", lambda: c(libc.creat(b"creat-4755", 0o4755)))
t("openat2 04755", lambda: openat2("openat2-4755", 0o4755))
t("O_TMPFILE 04755", lambda: tmpfile(0o4755, 0))
t("O_TMPFILE then fchmod 04755", lambda: tmpfile(0o755, 0o4755))
t("mknod regular 04755", lambda: os.mknod("mknod-4755", stat.S_IFREG | 0o4755))
t("mknod FIFO 02755", lambda: os.mknod("fifo-2755", stat.S_IFIFO | 0o2755))
t("chmod 04755", lambda: os.chmod(plain("chmod-4755"), 0o4755))
t("chmod 02755", lambda: os.chmod(plain("chmod-2755"), 0o2755))
t("mkdir 06755", lambda: os.mkdir("mkdir-6755", 0o6755))
t("mkdir in a setgid directory", lambda: os.mkdir("shared/sub", 0o755))
if suid:
    t("link to a set-id program", lambda: os.link(suid, "link"))
os.close(os.open("/tmp/moved", os.O_CREAT | os.O_WRONLY, 0o755))
try:
    os.chmod("/tmp/moved", 0o4755)
except OSError:
    pass
t("rename from /tmp", lambda: os.rename("/tmp/moved", "moved"))
PY
install -m 4755 /bin/true install-4755; echo "install -m 4755=$?"
cp -r shared shared-copy; echo "cp -r a setgid directory=$?"
if [ -n "$1" ]; then
	cp -p "$1" cp-p; echo "cp -p a set-id program=$?"
	cp "$1" cp; echo "cp a set-id program=$?"
	ln "$1" ln; echo "ln a set-id program=$?"
fi
`

// setuidProgram returns a setuid program of the host, or "".
func setuidProgram() string {
	for _, p := range []string{"/usr/bin/su", "/usr/bin/passwd", "/bin/su", "/usr/bin/mount", "/usr/bin/newgrp"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&os.ModeSetuid != 0 {
			return p
		}
	}
	return ""
}

// setidFiles lists the paths under ws with a set-id bit, relative to ws.
func setidFiles(t *testing.T, ws string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			rel, _ := filepath.Rel(ws, p)
			found = append(found, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s: %v", ws, err)
	}
	return found
}

// TestNoSetidFilesInWorkspace: under every profile but unconfined, no
// route leaves a set-id file in the workspace, whose files belong to its
// owner on the host (root's, when root runs moat). The one set-id entry
// that may appear is a directory made in a setgid directory the host
// made: the kernel passes the parent's bit down, and the command did not
// choose it. Under unconfined, the same script does leave set-id files,
// which shows that the scan finds them.
func TestNoSetidFilesInWorkspace(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed on this host")
	}
	suid := setuidProgram()
	if suid == "" {
		t.Log("no setuid program on this host: the routes through one are not tried")
	}
	// Refused with EPERM by the filter; the others fail for other reasons
	// (the workspace is a mount of its own: EXDEV) or are harmless.
	want := map[string]string{
		"open 06755":                  "EPERM",
		"open 02755":                  "EPERM",
		"creat 04755":                 "EPERM",
		"openat2 04755":               "ENOSYS",
		"O_TMPFILE 04755":             "EPERM",
		"O_TMPFILE then fchmod 04755": "EPERM",
		"mknod regular 04755":         "EPERM",
		"mknod FIFO 02755":            "EPERM",
		"chmod 04755":                 "EPERM",
		"chmod 02755":                 "EPERM",
		"mkdir 06755":                 "ok", // the kernel drops the bits
		"mkdir in a setgid directory": "ok",
		"rename from /tmp":            "EXDEV",
		"install -m 4755":             "1",
		"cp -r a setgid directory":    "0",
	}
	if suid != "" {
		want["link to a set-id program"] = "EXDEV"
		want["ln a set-id program"] = "1"
		want["cp -p a set-id program"] = "0" // it cannot keep the owner, so it drops the bits
		want["cp a set-id program"] = "0"
	}
	for _, profile := range []string{policy.ProfileDefault, policy.ProfileStrict, "docker-default", policy.ProfileUnconfined} {
		t.Run(profile, func(t *testing.T) {
			path := profile
			if profile == "docker-default" {
				path = dockerDefaultProfile(t)
			}
			ws := t.TempDir()
			if err := os.Mkdir(filepath.Join(ws, "shared"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(ws, "shared"), os.ModeSetgid|0o775); err != nil {
				t.Fatal(err)
			}
			r := runWithProfile(t, ws, path, "/bin/sh", "-c", setidRoutes, "sh", suid)
			mustExit(t, r, 0)
			got := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				if k, v, ok := strings.Cut(line, "="); ok {
					got[k] = v
				}
			}
			found := setidFiles(t, ws)
			if profile == policy.ProfileUnconfined {
				// The positive control: without a filter, the same calls
				// make set-id files, and the scan sees them.
				for _, name := range []string{"open-6755", "open-2755", "creat-4755", "openat2-4755", "tmpfile-4755-0",
					"tmpfile-755-4755", "mknod-4755", "fifo-2755", "chmod-4755", "chmod-2755", "install-4755"} {
					if !slices.Contains(found, name) {
						t.Errorf("unconfined: %s is not set-id (set-id files: %q)\n%s%s", name, found, r.stdout, r.stderr)
					}
				}
				return
			}
			for route, w := range want {
				if got[route] != w {
					t.Errorf("%s: %q, want %q", route, got[route], w)
				}
			}
			// shared is the host's; shared/sub is the kernel's doing.
			if !slices.Equal(found, []string{"shared", "shared/sub"}) {
				t.Errorf("set-id entries in the workspace: %q, want only the setgid directory the host made and the one made in it", found)
			}
			if t.Failed() {
				t.Logf("output:\n%s%s", r.stdout, r.stderr)
			}
			if profile != policy.ProfileDefault {
				return
			}
			// The report names the rule.
			for _, d := range r.rep.Denials {
				if d.What == "openat" && strings.Contains(d.Rule, "outside the sandbox") {
					return
				}
			}
			t.Errorf("no denial of openat with its rule in the report: %+v", r.rep.Denials)
		})
	}
}

// probeArg turns an argument of deniedProbes into the probe's notation
// (testdata/seccompprobe).
func probeArg(t *testing.T, a string) string {
	switch {
	case a == "atFdcwd":
		return "atcwd"
	case a == "fd" || a == "buf" || a == "self":
		return a
	case a == "str(file)":
		return "f:"
	case strings.HasPrefix(a, `str(file + "`):
		return "f:" + strings.TrimSuffix(strings.TrimPrefix(a, `str(file + "`), `")`)
	case strings.HasPrefix(a, `str("`):
		return "s:" + strings.TrimSuffix(strings.TrimPrefix(a, `str("`), `")`)
	case strings.HasPrefix(a, "^uintptr("):
		return "~" + strings.TrimSuffix(strings.TrimPrefix(a, "^uintptr("), ")")
	}
	for _, p := range strings.Split(a, "|") {
		if _, err := strconv.ParseUint(p, 0, 64); err != nil {
			t.Fatalf("probe argument %q has no notation", a)
		}
	}
	return a
}

// seccompProbe puts the probe program at bin: the one scripts/vmtest.sh
// built beside the test binary, or one built now.
func seccompProbe(t *testing.T, bin string) {
	t.Helper()
	if exe, err := os.Executable(); err == nil {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(exe), "seccomp-probe")); err == nil {
			if err := os.WriteFile(bin, b, 0o755); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
		if _, err := os.Stat(goBin); err != nil {
			t.Skip("go is not installed on this host: cannot build the probe program")
		}
	}
	build := exec.Command(goBin, "build", "-buildvcs=false", "-o", bin, "./testdata/seccompprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the probe: %v\n%s", err, out)
	}
}

// TestDenialsSurviveALimitsKill: the system calls the filter refused are
// in the report of a run a limit ended too, with or without a cgroup: a
// command hid them before by outliving --wall. Positive control: the
// same run ending by itself reports them.
func TestDenialsSurviveALimitsKill(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1)")
	}
	for _, tc := range []struct {
		name  string
		sleep string
		cause string
		cg    bool
	}{{"ends", "0", "exit", false}, {"killed", "30", "timeout", false}, {"killed in a cgroup", "30", "timeout", true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cg && os.Getuid() != 0 {
				t.Skip("a memory limit (a cgroup) needs root here")
			}
			r := run(t, t.TempDir(), func(p *policy.Policy) {
				p.Limits.Wall = policy.Duration(time.Second)
				if tc.cg {
					p.Limits.Memory = 512 << 20
				}
			}, "/bin/sh", "-c", "unshare -U true; sleep "+tc.sleep)
			if r.rep.Reason != tc.cause {
				t.Fatalf("reason %s, want %s (%s)", r.rep.Reason, tc.cause, r.stderr)
			}
			found := false
			for _, d := range r.rep.Denials {
				found = found || d.What == "unshare"
			}
			if !found {
				t.Errorf("no denial of unshare in the report: %+v", r.rep.Denials)
			}
		})
	}
}

// TestWorkspaceNoAccess: a workspace the caller may not enter is refused
// in one plain line, before anything else reads it (the guard warned in
// words of its own first, then chdir failed). The control: the same
// directory, entered, runs.
func TestWorkspaceNoAccess(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root enters every directory (the CI's moatci phase runs this)")
	}
	ws := filepath.Join(t.TempDir(), "locked")
	if err := os.Mkdir(ws, 0o000); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(ws, 0o755)
	r := run(t, ws, nil, "/bin/true")
	if r.err == nil || !strings.Contains(r.err.Error(), "workspace "+ws+": permission denied") || len(r.rep.Warnings) > 0 {
		t.Errorf("a workspace the caller may not enter: %v, warnings %q", r.err, r.rep.Warnings)
	}
	os.Chmod(ws, 0o755)
	if r := run(t, ws, nil, "/bin/true"); r.err != nil {
		t.Errorf("control: %v", r.err)
	}
}

// TestWorkspaceMissingOrNotADirectory: a workspace that does not exist,
// or is a file, is refused saying so, in every mode, before a change set
// is made for it (the error was a guard's open, a change set's lstat, or
// "permission denied" for a file). The control: a directory runs.
func TestWorkspaceMissingOrNotADirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{policy.WorkspaceDirect, policy.WorkspaceOverlay} {
		for ws, want := range map[string]string{
			filepath.Join(dir, "missing"): " does not exist",
			file:                          " is not a directory",
		} {
			r := run(t, ws, func(p *policy.Policy) { p.Workspace.Mode = mode }, "/bin/true")
			if r.err == nil || !strings.Contains(r.err.Error(), "workspace "+ws+want) {
				t.Errorf("%s workspace %s: %v, want %q", mode, ws, r.err, want)
			}
		}
		if r := run(t, dir, func(p *policy.Policy) { p.Workspace.Mode = mode }, "/bin/true"); r.err != nil {
			t.Errorf("control, %s: %v", mode, r.err)
		}
	}
}

// TestDenyOfHardLinkedFile: a denied file of several hard links is
// refused (its other name in the workspace showed it; found by a tester),
// and with AllowDegraded runs with the gap said. The control: the same
// file of one link is hidden and the run goes on.
func TestDenyOfHardLinkedFile(t *testing.T) {
	ws := t.TempDir()
	secret := filepath.Join(ws, "sub", "s")
	os.MkdirAll(filepath.Dir(secret), 0o755)
	os.WriteFile(secret, []byte("TOP\n"), 0o644)
	if err := os.Link(secret, filepath.Join(ws, ".hl")); err != nil {
		t.Fatal(err)
	}
	deny := func(p *policy.Policy) { p.Filesystem.Deny = append(p.Filesystem.Deny, secret) }
	r := sh(t, ws, deny, "cat .hl")
	if r.err == nil || !strings.Contains(r.err.Error(), secret+" has 2 hard links") || strings.Contains(r.stdout, "TOP") {
		t.Errorf("a denied file of two links: %v %q, want refused", r.err, r.stdout)
	}
	r = runDegraded(t, ws, deny, "cat sub/s 2>/dev/null; echo ran")
	if r.err != nil || !strings.Contains(r.stdout, "ran") || !slices.ContainsFunc(r.rep.Degraded, func(d string) bool { return strings.Contains(d, "2 hard links") }) {
		t.Errorf("degraded: %v %q %q", r.err, r.stdout, r.rep.Degraded)
	}
	// A session (a daemon's, as its own user or a tenant's) is refused
	// alike.
	p := policy.Default()
	p.Workspace.Path = ws
	deny(p)
	if err := p.Resolve(ws, ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*sandbox.Caller{nil, {Owner: os.Getuid(), UID: os.Getuid(), GID: os.Getgid(), Cwd: ws}} {
		s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: p, Caller: c})
		if err == nil {
			s.Close(context.Background())
		}
		if err == nil || !strings.Contains(err.Error(), secret+" has 2 hard links") {
			t.Errorf("a session, caller %+v: %v, want refused", c, err)
		}
	}
	os.Remove(filepath.Join(ws, ".hl"))
	r = sh(t, ws, deny, "cat sub/s 2>/dev/null; echo ran")
	if r.err != nil || r.stdout != "ran\n" {
		t.Errorf("control, one link: %v %q", r.err, r.stdout)
	}
}
