//go:build linux

package sandbox_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/internal/hostinfo"
	"github.com/moatbox/moat/internal/proctest"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// The native backend re-executes this test binary as the sandbox's init.
func TestMain(m *testing.M) {
	native.MaybeInit()
	gvisor.MaybeForward()
	if filepath.Base(os.Args[0]) == argvRacerName {
		os.Exit(argvRacer(os.Args[1:])) // a threaded program inside a sandbox (TestExecCheckArgvRace)
	}
	if target := os.Getenv("MOAT_TEST_GODIAL"); target != "" {
		os.Exit(goDial(target)) // a Go program inside a sandbox (TestTransparentEgress)
	}
	if spec := os.Getenv("MOAT_TEST_TLSALERT"); spec != "" {
		os.Exit(goTLSAlert(spec)) // a Go TLS client inside a sandbox (TestTransparentAlertBeforeClientHello)
	}
	os.Exit(proctest.RunWithStateDir(m))
}

type result struct {
	rep    *sandbox.Report
	err    error
	stdout string
	stderr string
}

// workspacePolicy is the default policy with ws as the workspace,
// resolved as the CLI would.
func workspacePolicy(t *testing.T, ws string) *policy.Policy {
	t.Helper()
	p := policy.Default()
	p.Workspace.Path = ws
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	return p
}

// serveGreeting accepts on ln until it is closed and writes msg to each
// connection: a host service the sandbox must not reach.
func serveGreeting(ln net.Listener, msg string) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(msg))
			c.Close()
		}
	}()
}

// run runs args in a real sandbox whose workspace is ws, under the default
// policy changed by edit.
// testBackend is the backend the tests run: the default one, or with
// MOAT_TEST_FORK_START=1 the native backend whose direct start forks, as
// on architectures without the clone trampoline (arm64), so that this
// path runs on amd64 too (scripts/test.sh runs the suite both ways).
func testBackend() backend.Backend {
	if os.Getenv("MOAT_TEST_FORK_START") == "1" {
		return &native.Backend{ForkStart: true}
	}
	return nil
}

func run(t *testing.T, ws string, edit func(*policy.Policy), args ...string) result {
	t.Helper()
	p := policy.Default()
	p.Workspace.Path = ws
	if edit != nil {
		edit(p)
	}
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	var out, errb bytes.Buffer
	rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: args},
		backend.Stdio{Stdout: &out, Stderr: &errb})
	if rep == nil {
		t.Fatalf("nil report (err %v)", err)
	}
	return result{rep, err, out.String(), errb.String()}
}

func sh(t *testing.T, ws string, edit func(*policy.Policy), script string) result {
	t.Helper()
	return run(t, ws, edit, "/bin/sh", "-c", script)
}

func mustExit(t *testing.T, r result, code int) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("run failed: %v\nstderr: %s", r.err, r.stderr)
	}
	if r.rep.ExitCode != code {
		t.Fatalf("exit code %d (reason %s), want %d\nstdout: %s\nstderr: %s", r.rep.ExitCode, r.rep.Reason, code, r.stdout, r.stderr)
	}
}

func TestScriptRunsAndExitCodeComesThrough(t *testing.T) {
	ws := t.TempDir()
	r := sh(t, ws, nil, "echo hello from inside; exit 3")
	mustExit(t, r, 3)
	if r.stdout != "hello from inside\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	if r.rep.Reason != "exit" || r.rep.Signal != nil {
		t.Errorf("reason %q signal %v", r.rep.Reason, r.rep.Signal)
	}
	if s := r.rep.SetupSeconds; s <= 0 || s >= r.rep.WallSeconds {
		t.Errorf("setup_seconds %g is not within wall_seconds %g", s, r.rep.WallSeconds)
	}
}

func TestIdentityIsUnprivileged(t *testing.T) {
	ws := t.TempDir()
	r := sh(t, ws, nil, `id -u; id -g; cat /proc/self/uid_map; grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status; hostname; grep -E 'Cap(Inh|Prm|Bnd|Amb)' /proc/self/status`)
	mustExit(t, r, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) < 6 || lines[0] != "1000" || lines[1] != "1000" {
		t.Fatalf("ids: %q", r.stdout)
	}
	// One id, mapped to the caller's (an ordinary caller) or, as root,
	// to the dedicated host id, or to the workspace owner's id (0, root's
	// workspace) in init's user namespace, which maps that to the
	// dedicated host id (the nested identity, see TestNestedIdentity in
	// backend/native). The host ids themselves are checked from outside
	// below.
	mapping := strings.Fields(lines[2])
	wantHost := fmt.Sprint(os.Geteuid())
	parents := []string{wantHost}
	if os.Geteuid() == 0 {
		wantHost = fmt.Sprint(policy.Default().User.HostUID)
		parents = []string{wantHost, "0"}
	}
	if len(mapping) != 3 || mapping[0] != "1000" || !slices.Contains(parents, mapping[1]) || mapping[2] != "1" {
		t.Errorf("uid_map %q, want 1000 -> one of %q only", lines[2], parents)
	}
	if !strings.HasSuffix(lines[3], "0000000000000000") {
		t.Errorf("command has capabilities: %q", lines[3])
	}
	if !strings.HasSuffix(lines[4], "1") {
		t.Errorf("no_new_privs not set: %q", lines[4])
	}
	if lines[5] != "moat" {
		t.Errorf("hostname %q", lines[5])
	}
	for _, l := range lines[6:] {
		if !strings.HasSuffix(l, "0000000000000000") {
			t.Errorf("capability set not empty: %q", l)
		}
	}

	// Init (PID 1 inside) drops every capability before the command
	// starts, on all of its threads, but one inert capability a direct
	// start's init keeps in its permitted set (CAP_BLOCK_SUSPEND, checked
	// only in the host's initial user namespace, where init has none): it
	// is what denies the command ptrace access to init, see
	// TestInitMemoryIsOutOfReach. Nothing in the sandbox holds a
	// capability the command could borrow, and no thread of init can gain
	// privileges through exec. Init is invisible inside (see
	// TestInitIsInvisible), so this is read from the host.
	for _, profile := range []string{"default", "unconfined"} {
		init, cmd := initThreadStatus(t, ws, func(p *policy.Policy) { p.Syscalls.Profile = profile })
		// Whatever the namespaces say, the kernel's own ids for the
		// command are the unprivileged host ids: real, effective, saved
		// and filesystem ids alike.
		wantGID := fmt.Sprint(os.Getegid())
		if os.Geteuid() == 0 {
			wantGID = fmt.Sprint(policy.Default().User.HostGID)
		}
		for _, l := range cmd {
			f := strings.Fields(l)
			want := wantHost
			if f[0] == "Gid:" {
				want = wantGID
			}
			if len(f) != 5 || f[1] != want || f[2] != want || f[3] != want || f[4] != want {
				t.Errorf("%s: the command's host ids: %q, want %s", profile, l, want)
			}
		}
		if len(cmd) != 2 {
			t.Errorf("%s: the command's Uid and Gid lines: %q", profile, cmd)
		}
		if len(init) < 5 {
			t.Fatalf("%s: init's capability sets: %q", profile, init)
		}
		for _, l := range init {
			if strings.HasPrefix(l, "NoNewPrivs") && !strings.HasSuffix(l, "1") {
				t.Errorf("%s: a thread of init lacks no_new_privs: %q", profile, l)
			}
			inert := strings.HasPrefix(l, "CapPrm") && strings.HasSuffix(l, fmt.Sprintf("%016x", uint64(1)<<unix.CAP_BLOCK_SUSPEND))
			if strings.HasPrefix(l, "Cap") && !strings.HasSuffix(l, "0000000000000000") && !inert {
				t.Errorf("%s: init holds capabilities: %q", profile, l)
			}
		}
	}
}

// initThreadStatus starts a run whose command waits, and returns the
// capability and no_new_privs lines of every thread of its init, as the
// host's /proc shows them once the command is running, and the command's
// Uid and Gid lines.
func initThreadStatus(t *testing.T, ws string, edit func(*policy.Policy)) (init, cmd []string) {
	t.Helper()
	p := workspacePolicy(t, ws)
	edit(p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := sandbox.Run(ctx, &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"/bin/sh", "-c", "echo up; exec sleep 60"}},
			backend.Stdio{Stdout: pw, Stderr: io.Discard})
		pw.Close()
		done <- err
	}()
	defer func() { cancel(); <-done }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if line != "up\n" {
		t.Fatalf("command did not start: %q %v", line, err)
	}
	go io.Copy(io.Discard, pr)
	pid := childInit(t)
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Cap") && !strings.HasPrefix(l, "CapBnd") || strings.HasPrefix(l, "NoNewPrivs") {
				init = append(init, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	for _, c := range proctest.Children(pid) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", c))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Uid:") || strings.HasPrefix(l, "Gid:") {
				cmd = append(cmd, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	return init, cmd
}

// childInit returns the pid of the sandbox init this test process started.
func childInit(t *testing.T) int {
	t.Helper()
	for _, pid := range proctest.Children(os.Getpid()) {
		// Init is PID 1 of a namespace of its own: the last field of
		// its NSpid line is 1. (A direct start's init shares this
		// process's memory, and so shows its command line.)
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, l := range strings.Split(string(status), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "NSpid:" && f[2] == "1" {
				return pid
			}
		}
	}
	t.Fatal("no sandbox init among this process's children")
	return 0
}

// TestSignalsToInitAreIgnored: the command cannot end or disturb init by
// signalling PID 1 (the Go runtime would exit or dump on SIGTERM, SIGINT,
// SIGHUP, SIGQUIT, SIGABRT); the run goes on and ends with the command's
// own status.
// Every signal number is sent, in the direct start (a raw init) and in the
// init stage (Go's runtime as PID 1: an overlay workspace), where the
// runtime would also crash on a SIGILL, SIGBUS, SIGFPE, SIGSEGV or SIGTRAP
// sent rather than raised by a fault.
func TestSignalsToInitAreIgnored(t *testing.T) {
	// An overlay under a disk limit runs the init stage (the other two,
	// the direct start): the fault signals sent to it crashed it.
	for _, mode := range []string{policy.WorkspaceDirect, policy.WorkspaceOverlay, "overlay+disk"} {
		t.Run(mode, func(t *testing.T) {
			ws := t.TempDir()
			r := sh(t, ws, func(p *policy.Policy) {
				p.Workspace.Mode = strings.TrimSuffix(mode, "+disk")
				if mode == "overlay+disk" {
					p.Limits.Disk = 20 << 20
				}
			}, `for s in $(seq 1 31); do kill -$s 1 2>/dev/null; done
sleep 0.2; echo alive; exit 5`)
			if mode != policy.WorkspaceDirect && r.err != nil && strings.Contains(r.err.Error(), "overlay") {
				t.Skipf("no overlayfs here: %v", r.err)
			}
			mustExit(t, r, 5)
			if r.rep.Reason != "exit" || !strings.Contains(r.stdout, "alive") || strings.Contains(r.stdout+r.stderr, "goroutine") {
				t.Errorf("reason %q\nstdout %q\nstderr %q", r.rep.Reason, r.stdout, r.stderr)
			}
		})
	}
}

// TestInitIsInvisible: /proc inside is mounted with hidepid=2, and init,
// not dumpable, is not among the processes the command can see: not its
// status, not its threads (which, but for the main one, are still in the
// host's network namespace). The command's own processes are there.
func TestInitIsInvisible(t *testing.T) {
	ws := t.TempDir()
	r := sh(t, ws, nil, `[ -e /proc/1 ] && echo SEE-1
cat /proc/1/status 2>/dev/null && echo READ-1
for p in $(seq 1 64); do [ -e /proc/$p/task ] && echo "pid $p"; done
grep -c . /proc/self/status >/dev/null && echo self-ok
true`)
	mustExit(t, r, 0)
	if strings.Contains(r.stdout, "SEE-1") || strings.Contains(r.stdout, "READ-1") || strings.Contains(r.stdout, "pid 1\n") {
		t.Errorf("init is visible inside:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "self-ok") || !strings.Contains(r.stdout, "pid ") {
		t.Errorf("the command cannot see its own processes:\n%s%s", r.stdout, r.stderr)
	}
}

// TestInitMemoryIsOutOfReach: a direct start's init shares moat's memory
// (the policy, moat's environment), so the command must have no way into
// it, even with no seccomp filter to refuse ptrace: /proc/1/mem,
// /proc/1/environ and a ptrace attach are all refused, whether the
// command looks for init as PID 1 or by scanning /proc.
func TestInitMemoryIsOutOfReach(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	ws := t.TempDir()
	script := `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for pid in ["1"] + [d for d in os.listdir("/proc") if d.isdigit()]:
    for f in ("mem", "environ", "maps"):
        try:
            with open("/proc/%s/%s" % (pid, f), "rb") as h:
                data = h.read(64)
            if pid == "1" or b"MOAT_SECRET_MARK" in data:
                print("READ", pid, f)
        except OSError:
            pass
PTRACE_ATTACH, PTRACE_DETACH = 16, 17
if libc.ptrace(PTRACE_ATTACH, 1, 0, 0) == 0:
    print("ATTACHED 1")
    os.waitpid(1, 0x40000000)  # __WALL
    libc.ptrace(PTRACE_DETACH, 1, 0, 0)
print("done")
`
	t.Setenv("MOAT_SECRET_MARK", "sk-live-mark")
	r := run(t, ws, func(p *policy.Policy) { p.Syscalls.Profile = "unconfined" }, "python3", "-c", script)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "done") || strings.Contains(r.stdout, "READ") || strings.Contains(r.stdout, "ATTACHED") {
		t.Errorf("init's memory is within reach:\n%s%s", r.stdout, r.stderr)
	}
}

func TestSecretsAreInvisible(t *testing.T) {
	ws := t.TempDir()
	// A secret of the caller's outside the workspace, and one inside that
	// the policy denies.
	outsideDir := t.TempDir()
	outside := filepath.Join(outsideDir, "id_rsa")
	os.WriteFile(outside, []byte("PRIVATE KEY"), 0o644)
	inside := filepath.Join(ws, "secret.txt")
	os.WriteFile(inside, []byte("TOKEN"), 0o644)
	visible := filepath.Join(ws, "visible.txt")
	os.WriteFile(visible, []byte("VISIBLE"), 0o644)
	home, _ := os.UserHomeDir()
	// The secrets are readable from here: a probe that fails inside fails
	// because of the sandbox.
	for _, f := range []string{outside, inside} {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatalf("the host cannot read %s: %v", f, err)
		}
	}
	script := probeSh + fmt.Sprintf(`
for f in /etc/shadow /etc/gshadow %s/.ssh/id_rsa %s %s %s; do try_read "$f"; done
cat %s %s 2>/dev/null; echo
stat -c 'size %%n %%s' /etc/shadow
ls %s >/dev/null 2>&1 && echo "LISTED home"
true`, home, outside, inside, visible, outside, inside, home)
	r := sh(t, ws, func(p *policy.Policy) { p.Filesystem.Deny = append(p.Filesystem.Deny, inside) }, script)
	mustExit(t, r, 0)
	if strings.Contains(r.stdout, "KEY") || strings.Contains(r.stdout, "TOKEN") || strings.Contains(r.stdout, "LISTED") {
		t.Errorf("a secret was readable:\n%s", r.stdout)
	}
	wantOutcome(t, r.stdout, "DENIED", "/etc/shadow", "/etc/gshadow", home+"/.ssh/id_rsa", outside, inside)
	// The positive control in the same run: a workspace file the policy
	// does not deny reads, so the probe itself works.
	wantOutcome(t, r.stdout, "READ", visible)
	// /etc/shadow is masked (empty), not merely unreadable to the
	// command's uid, as the run below without the deny shows.
	if !strings.Contains(r.stdout, "size /etc/shadow 0\n") {
		t.Errorf("/etc/shadow is not masked:\n%s", r.stdout)
	}
	// The denied file is still there on the host, unchanged.
	if b, _ := os.ReadFile(inside); string(b) != "TOKEN" {
		t.Errorf("denied file changed on host: %q", b)
	}

	// The same probes with the policy exposing both secrets (the outside
	// one read-only, the inside one no longer denied) and denying
	// nothing: they read, so the probes above would catch a leak.
	r = sh(t, ws, func(p *policy.Policy) {
		p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, outsideDir)
		p.Filesystem.Deny = nil
	}, script)
	mustExit(t, r, 0)
	wantOutcome(t, r.stdout, "READ", outside, inside, visible)
	if !strings.Contains(r.stdout, "KEY") || !strings.Contains(r.stdout, "TOKEN") {
		t.Errorf("the exposed secrets' contents did not come through:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "size /etc/shadow 0\n") {
		t.Errorf("/etc/shadow is empty without a deny rule, so the check above proves nothing:\n%s", r.stdout)
	}
}

// TestDenyThroughSymlinkedBind: a denied file stays hidden where a tree
// bound by a path with a symlink in it shows it (a read-write path, the
// workspace, in each mode): it was read and written there, since the
// mask went only where the deny names it (found by a tester, tried). The
// control: the same probe reads a file of that tree the policy does not
// deny.
func TestDenyThroughSymlinkedBind(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "secretdir")
	os.Mkdir(real, 0o755)
	secret := filepath.Join(real, "key")
	os.WriteFile(secret, []byte("TOPSECRET"), 0o644)
	os.WriteFile(filepath.Join(real, "open.txt"), []byte("OPEN"), 0o644)
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	probe := probeSh + "try_read " + link + "/key\ntry_write " + link + "/key\ntry_read " + link + "/open.txt\n"
	r := sh(t, t.TempDir(), func(p *policy.Policy) {
		p.Filesystem.ReadWrite = append(p.Filesystem.ReadWrite, link)
		p.Filesystem.Deny = append(p.Filesystem.Deny, secret)
	}, probe)
	mustExit(t, r, 0)
	wantOutcome(t, r.stdout, "DENIED", link+"/key")
	wantOutcome(t, r.stdout, "READ", link+"/open.txt")
	for _, mode := range []string{policy.WorkspaceDirect, policy.WorkspaceOverlay, policy.WorkspaceCopy} {
		r := sh(t, link, func(p *policy.Policy) {
			p.Workspace.Mode = mode
			p.Filesystem.Deny = append(p.Filesystem.Deny, secret)
		}, probeSh+"try_read "+link+"/key\ntry_read "+link+"/open.txt\n")
		mustExit(t, r, 0)
		wantOutcome(t, r.stdout, "DENIED", link+"/key")
		wantOutcome(t, r.stdout, "READ", link+"/open.txt")
	}
	if b, _ := os.ReadFile(secret); string(b) != "TOPSECRET" {
		t.Errorf("the denied file changed on the host: %q", b)
	}
}

// TestReadWriteInOverlayWarned: a read-write path inside an overlay,
// copy or readonly workspace is written in place on the host, outside the
// change set: the report says so, naming the field (it said nothing,
// found by a tester). The control: in a direct workspace it is no news.
func TestReadWriteInOverlayWarned(t *testing.T) {
	ws := t.TempDir()
	sub := filepath.Join(ws, "sub")
	os.Mkdir(sub, 0o755)
	for _, mode := range []string{policy.WorkspaceOverlay, policy.WorkspaceReadOnly, policy.WorkspaceDirect} {
		r := sh(t, ws, func(p *policy.Policy) {
			p.Workspace.Mode = mode
			p.Filesystem.ReadWrite = append(p.Filesystem.ReadWrite, sub)
		}, "echo x > sub/f")
		mustExit(t, r, 0)
		warned := slices.ContainsFunc(r.rep.Warnings, func(w string) bool {
			return strings.Contains(w, "filesystem.read_write[0] "+sub+" is in the "+mode+" workspace")
		})
		if warned != (mode != policy.WorkspaceDirect) {
			t.Errorf("%s: warnings %q", mode, r.rep.Warnings)
		}
	}
}

func TestWritesOutsideWorkspaceFail(t *testing.T) {
	ws := t.TempDir()
	home, _ := os.UserHomeDir()
	targets := []string{"/etc/moat-x", "/usr/moat-x", "/moat-x", home + "/moat-x", "/proc/sys/kernel/hostname", "/proc/sys/net/ipv4/ip_forward"}
	script := probeSh
	for _, f := range targets {
		script += "try_write " + f + "\n"
	}
	// The positive controls: the same probe writes where the policy allows.
	script += "try_write /tmp/scratch\ntry_write " + ws + "/out.txt\n"
	r := sh(t, ws, nil, script)
	mustExit(t, r, 0)
	wantOutcome(t, r.stdout, "DENIED", targets...)
	wantOutcome(t, r.stdout, "WROTE", "/tmp/scratch", ws+"/out.txt")
	for _, f := range targets[:4] {
		if _, err := os.Stat(f); err == nil {
			os.Remove(f)
			t.Errorf("%s appeared on the host", f)
		}
	}
	// The workspace write persists, owned by the workspace's owner.
	fi, err := os.Stat(filepath.Join(ws, "out.txt"))
	if err != nil {
		t.Fatalf("workspace write did not persist: %v", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid() {
		t.Errorf("out.txt owned by %d:%d, want the caller %d:%d", st.Uid, st.Gid, os.Geteuid(), os.Getegid())
	}
}

// TestReadWritePathsOfOtherOwners: as root, each writable path is id-mapped
// for its own owner, so the command can write in a --rw directory that
// belongs to someone other than the workspace's owner, and what it creates
// there lands owned by that directory's owner.
func TestReadWritePathsOfOtherOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root id-maps writable paths (an ordinary caller's files are its own)")
	}
	ws := t.TempDir()
	other := t.TempDir()
	const uid, gid = 12345, 12346
	if err := os.Chown(other, uid, gid); err != nil {
		t.Fatal(err)
	}
	r := sh(t, ws, func(p *policy.Policy) { p.Filesystem.ReadWrite = append(p.Filesystem.ReadWrite, other) },
		fmt.Sprintf("echo a > %s/a && echo b > %s/b && stat -c %%u:%%g %s/b", ws, other, other))
	mustExit(t, r, 0)
	if got := strings.TrimSpace(r.stdout); got != "1000:1000" {
		t.Errorf("inside, the new file in the other owner's directory is %s, want the sandbox user 1000:1000", got)
	}
	for _, c := range []struct {
		path     string
		uid, gid int
	}{{filepath.Join(ws, "a"), 0, 0}, {filepath.Join(other, "b"), uid, gid}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Errorf("write did not persist: %v", err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != c.uid || int(st.Gid) != c.gid {
			t.Errorf("%s owned by %d:%d on the host, want %d:%d", c.path, st.Uid, st.Gid, c.uid, c.gid)
		}
	}
}

// TestWorkspaceOnTmpfs runs root's sandbox on a workspace on tmpfs, which
// the kernel can id-map from Linux 6.3 on. Before that, moat must refuse
// with a message naming the filesystem and the ways out, and write nothing;
// it must never fall back to a mapping that makes the command host root.
func TestWorkspaceOnTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root id-maps writable paths (an ordinary caller's files are its own)")
	}
	ws := t.TempDir()
	if err := syscall.Mount("moattest", ws, "tmpfs", 0, "mode=755"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(ws, syscall.MNT_DETACH) })
	r := sh(t, ws, nil, "echo written > f && stat -c %u f")
	major, minor := hostinfo.KernelVersion()
	if major > 6 || major == 6 && minor >= 3 {
		mustExit(t, r, 0)
		if got := strings.TrimSpace(r.stdout); got != "1000" {
			t.Errorf("inside, the new file is owned by %s, want the sandbox user 1000", got)
		}
		fi, err := os.Stat(filepath.Join(ws, "f"))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
			t.Errorf("the new file is owned by %d on the host, want the workspace's owner 0", st.Uid)
		}
		return
	}
	t.Logf("Linux %d.%d: tmpfs cannot be id-mapped; want a refusal", major, minor)
	if r.err == nil || r.rep.ExitCode != 125 || !errors.Is(r.err, errors.ErrUnsupported) {
		t.Fatalf("err %v, exit %d: want moat's own error (125, unsupported)", r.err, r.rep.ExitCode)
	}
	for _, want := range []string{ws, "tmpfs", "cannot id-map", "ordinary user"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, r.err)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "f")); err == nil {
		t.Error("the command ran: f was written")
	}
}

func TestProtectedPathsAreReadOnly(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git/config"), []byte("[core]\n"), 0o644)
	r := sh(t, ws, nil, `
if echo evil > .git/hooks/pre-commit 2>/dev/null; then echo WROTE-hook; fi
if echo evil >> .git/config 2>/dev/null; then echo WROTE-config; fi
echo fine > .git/other && echo other-ok`)
	mustExit(t, r, 0)
	if strings.Contains(r.stdout, "WROTE") || !strings.Contains(r.stdout, "other-ok") {
		t.Errorf("protect: %s %s", r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git/hooks/pre-commit")); err == nil {
		t.Error("hook planted on the host")
	}
}

func TestEnvironmentIsScrubbed(t *testing.T) {
	t.Setenv("API_KEY", "sk-live-123")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "abc")
	t.Setenv("LC_MOAT_TEST", "kept")
	ws := t.TempDir()
	r := run(t, ws, func(p *policy.Policy) { p.Env.Set["EXTRA"] = "set" }, "/usr/bin/env")
	mustExit(t, r, 0)
	if strings.Contains(r.stdout, "sk-live-123") || strings.Contains(r.stdout, "AWS_SECRET") {
		t.Errorf("secret leaked:\n%s", r.stdout)
	}
	for _, want := range []string{"LC_MOAT_TEST=kept", "EXTRA=set", "HOME=/home/agent"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %s in\n%s", want, r.stdout)
		}
	}
}

func TestCPUTimeLimit(t *testing.T) {
	ws := t.TempDir()
	r := sh(t, ws, func(p *policy.Policy) { p.Limits.CPU = policy.Duration(time.Second) }, "while :; do :; done")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rep.Reason != "cpu" {
		t.Fatalf("reason %q, want cpu (exit %d signal %v)", r.rep.Reason, r.rep.ExitCode, r.rep.Signal)
	}
}

// TestSelfRaisedLimitSignal: a command that raises SIGXCPU itself, far
// from its CPU-time limit, died of a signal; the report does not say the
// limit was reached (it did, after a millisecond; found by a tester).
// TestCPUTimeLimit is the control.
func TestSelfRaisedLimitSignal(t *testing.T) {
	ws := t.TempDir()
	r := sh(t, ws, nil, "kill -XCPU $$")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rep.Reason != "signal" || r.rep.Signal == nil || *r.rep.Signal != "SIGXCPU" || len(r.rep.LimitsHit) != 0 {
		t.Errorf("reason %q signal %v limits_hit %q, want a signal and no limit", r.rep.Reason, r.rep.Signal, r.rep.LimitsHit)
	}
}

func TestWallClockLimit(t *testing.T) {
	ws := t.TempDir()
	start := time.Now()
	r := sh(t, ws, func(p *policy.Policy) { p.Limits.Wall = policy.Duration(2 * time.Second) }, "sleep 30")
	took := time.Since(start)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rep.Reason != "timeout" || r.rep.ExitCode != 128+9 {
		t.Fatalf("reason %q exit %d, want timeout", r.rep.Reason, r.rep.ExitCode)
	}
	if took > 2500*time.Millisecond {
		t.Errorf("took %v, want within 2.5s", took)
	}
}

// slowWriter takes its first write only after a delay: a reader slow to
// drain the command's output.
type slowWriter struct {
	delay time.Duration
	once  sync.Once
}

func (w *slowWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { time.Sleep(w.delay) })
	return len(p), nil
}

// TestWallSecondsIsTheCommands: a command the wall limit killed whose
// output a slow reader drains long after: wall_seconds is the command's
// time, not the reader's. The control: the run itself lasted as long as
// the reader.
func TestWallSecondsIsTheCommands(t *testing.T) {
	ws := t.TempDir()
	p := policy.Default()
	p.Workspace.Path = ws
	p.Limits.Wall = policy.Duration(time.Second)
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"yes"}},
		backend.Stdio{Stdout: &slowWriter{delay: 3 * time.Second}, Stderr: io.Discard})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Reason != "timeout" || rep.WallSeconds > 2 {
		t.Errorf("reason %s, wall_seconds %.2f: want timeout within about 1 s", rep.Reason, rep.WallSeconds)
	}
	if took < 3*time.Second {
		t.Errorf("control: the run returned after %v, before its reader took the output", took)
	}
}

func TestOutputLimit(t *testing.T) {
	ws := t.TempDir()
	r := run(t, ws, func(p *policy.Policy) { p.Limits.Output = policy.Size(1 << 20) }, "yes")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rep.Reason != "output" {
		t.Fatalf("reason %q, want output", r.rep.Reason)
	}
	if len(r.stdout) != 1<<20 {
		t.Errorf("passed %d bytes, want exactly the limit", len(r.stdout))
	}
	// What was passed on, not what was read before the command stopped
	// (a pipe's chunk past the limit), which the backend decides.
	if r.rep.OutputBytes != 1<<20 {
		t.Errorf("output_bytes %d, want the limit", r.rep.OutputBytes)
	}
}

func TestFileSizeLimit(t *testing.T) {
	ws := t.TempDir()
	r := sh(t, ws, func(p *policy.Policy) { p.Limits.FileSize = policy.Size(1 << 20) }, "head -c 5000000 /dev/zero > big")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rep.Reason != "file_size" && r.rep.ExitCode == 0 {
		t.Fatalf("reason %q exit %d: a 5 MB file was written under a 1 MiB limit", r.rep.Reason, r.rep.ExitCode)
	}
	if fi, err := os.Stat(filepath.Join(ws, "big")); err == nil && fi.Size() > 1<<20 {
		t.Errorf("file of %d bytes", fi.Size())
	}
}

// TestFileSizeLimitKeepSize: under a file-size limit, blocks reserved
// past a file's end (fallocate --keep-size) are refused, on the host's
// disk where the kernel's limit does not see them (found by a tester: a
// file of size 0 held 150 MiB under --file-size 1M). The controls: the
// same reservation without the limit, and a hole punched under it.
func TestFileSizeLimitKeepSize(t *testing.T) {
	if _, err := exec.LookPath("fallocate"); err != nil {
		t.Skip("fallocate (util-linux) is not installed here")
	}
	script := "touch k && fallocate -n -l 8M k && echo reserved; head -c 8192 /dev/zero > h && fallocate -p -o 0 -l 4096 h && echo punched; " +
		"head -c 8192 /dev/zero > i && fallocate -i -o 4096 -l 8M i 2>/dev/null; echo inserted $(stat -c %s i)"
	for _, limit := range []policy.Size{1 << 20, 0} {
		ws := t.TempDir()
		r := sh(t, ws, func(p *policy.Policy) { p.Limits.FileSize = limit }, script)
		if r.err != nil {
			t.Fatal(r.err)
		}
		var st syscall.Stat_t
		syscall.Stat(filepath.Join(ws, "k"), &st)
		reserved := strings.Contains(r.stdout, "reserved")
		if !strings.Contains(r.stdout, "punched") {
			t.Errorf("limit %d: a hole was not punched: %q %q", limit, r.stdout, r.stderr)
		}
		switch {
		case limit > 0 && (reserved || st.Blocks*512 > 1<<20):
			t.Errorf("limit %d: %d bytes reserved past a file's end (%q)", limit, st.Blocks*512, r.stdout)
		case limit == 0 && !reserved:
			t.Errorf("control: no limit, the reservation failed: %q %q", r.stdout, r.stderr)
		}
		// A range inserted grows the file where the filesystem can
		// (ext4, xfs: not tmpfs, which has no insert at all).
		grown := !strings.Contains(r.stdout, "inserted 8192\n")
		if limit > 0 && grown {
			t.Errorf("limit %d: a range inserted past the limit: %q", limit, r.stdout)
		}
		if limit == 0 && !grown {
			t.Logf("control: no limit, no range inserted (the filesystem has no insert): %q", r.stdout)
		}
	}
	// Without moat's filter nothing refuses the reservation: the run
	// says so, and says nothing of it when it has no such limit.
	for _, limit := range []policy.Size{1 << 20, 0} {
		r := sh(t, t.TempDir(), func(p *policy.Policy) {
			p.Limits.FileSize = limit
			p.Syscalls.Profile = policy.ProfileUnconfined
		}, "true")
		if r.err != nil {
			t.Fatal(r.err)
		}
		said := strings.Contains(strings.Join(r.rep.Warnings, "\n"), "(--keep-size) or ranges inserted (--insert-range)")
		if said != (limit > 0) {
			t.Errorf("unconfined, limit %d: warnings %q", limit, r.rep.Warnings)
		}
	}
}

// cgroupOrSkip skips a test of a cgroup limit where this caller cannot
// have it, and checks that moat refuses instead.
func cgroupOrSkip(t *testing.T, ok bool, why string) {
	t.Helper()
	if !ok {
		t.Skipf("cgroup limit not available to uid %d here: %s (TestRefusesUnenforceableLimits covers the refusal)", os.Geteuid(), why)
	}
}

func TestMemoryLimit(t *testing.T) {
	caps := (&native.Backend{}).Capabilities()
	cgroupOrSkip(t, caps.Memory, caps.MemoryWhy)
	ws := t.TempDir()
	r := run(t, ws, func(p *policy.Policy) { p.Limits.Memory = policy.Size(100 << 20) },
		"python3", "-c", "x = []\nwhile True: x.append(bytearray(10<<20))")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rep.Reason != "memory" {
		t.Fatalf("reason %q (exit %d), want memory\n%s", r.rep.Reason, r.rep.ExitCode, r.stderr)
	}
}

// TestRefusedRunEnforcesNoLimit: a run moat could not start says no
// limit was in force (a refused run's report named the cgroup enforcing
// its memory limit; found by a tester). The control: the same limit on a
// command that runs is named.
func TestRefusedRunEnforcesNoLimit(t *testing.T) {
	limit := func(p *policy.Policy) { p.Limits.Pids = 64 }
	r := run(t, t.TempDir(), limit, "/nonexistent/program")
	if r.err == nil || r.rep.ExitCode != 127 || len(r.rep.LimitsEnforcedBy) != 0 {
		t.Errorf("a refused run: %v, exit %d, limits enforced by %v", r.err, r.rep.ExitCode, r.rep.LimitsEnforcedBy)
	}
	r = run(t, t.TempDir(), limit, "true")
	if r.err != nil || r.rep.LimitsEnforcedBy["pids"] == "" {
		t.Errorf("control: a run: %v, limits enforced by %v", r.err, r.rep.LimitsEnforcedBy)
	}
}

func TestForkBombIsContained(t *testing.T) {
	caps := (&native.Backend{}).Capabilities()
	if !caps.Pids {
		t.Skipf("no process limit for this caller here: %s", caps.PidsWhy)
	}
	ws := t.TempDir()
	r := sh(t, ws, func(p *policy.Policy) {
		p.Limits.Pids = 64
		p.Limits.Wall = policy.Duration(5 * time.Second)
	}, `bomb() { bomb | bomb & }; bomb; sleep 2; exit 1`)
	if r.err != nil {
		t.Fatal(r.err)
	}
	hit := false
	for _, l := range r.rep.LimitsHit {
		hit = hit || l == "pids"
	}
	if by := r.rep.LimitsEnforcedBy["pids"]; by != caps.PidsBy {
		t.Errorf("limits_enforced_by.pids %q, want %q", by, caps.PidsBy)
	}
	// An rlimit's refusals are counted nowhere (see Report.LimitsHit): the
	// bomb's own exit status is all there is to see.
	rlimit := caps.PidsBy == backend.PidsRlimit
	if !hit && !rlimit {
		t.Errorf("limits_hit %v, want pids (reason %s)", r.rep.LimitsHit, r.rep.Reason)
	}
	if r.rep.Reason != "pids" && r.rep.Reason != "timeout" && !(rlimit && r.rep.Reason == "exit") {
		t.Errorf("reason %q", r.rep.Reason)
	}
	// The host can still fork.
	if err := exec.Command("/bin/true").Run(); err != nil {
		t.Errorf("host cannot fork after the bomb: %v", err)
	}
}

// countTasks starts processes (fork) or threads until one is refused or
// 300 run, and prints how many it started.
const countTasks = `
import os, sys, time, threading
n = 0
try:
    while n < 300:
        if sys.argv[1] == "fork":
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
        else:
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        n += 1
except (OSError, RuntimeError) as e:
    print("refused:", e, file=sys.stderr)
print(n, flush=True)
os._exit(0)
`

// TestProcessLimitHolds: --pids bounds processes and threads together for
// every caller, without --allow-degraded: with a cgroup where this caller
// has one, else with RLIMIT_NPROC (as an ordinary user without cgroup
// delegation, which the machines this is built on are). The report names
// the mechanism. Positive control: under a higher limit, more than the
// lower one start.
func TestProcessLimitHolds(t *testing.T) {
	caps := (&native.Backend{}).Capabilities()
	if !caps.Pids && !native.NprocPerUserns() {
		t.Skipf("no process limit for this caller here: %s", caps.PidsWhy)
	}
	started := func(kind string, pids int64) int {
		t.Helper()
		ws := t.TempDir()
		r := run(t, ws, func(p *policy.Policy) {
			p.Limits.Pids = pids
			p.Limits.Wall = policy.Duration(20 * time.Second)
		}, "python3", "-c", countTasks, kind)
		mustExit(t, r, 0)
		if by := r.rep.LimitsEnforcedBy["pids"]; by != caps.PidsBy {
			t.Errorf("limits_enforced_by.pids %q, want %q", by, caps.PidsBy)
		}
		n, err := strconv.Atoi(strings.TrimSpace(r.stdout))
		if err != nil {
			t.Fatalf("output %q %q", r.stdout, r.stderr)
		}
		return n
	}
	for _, kind := range []string{"fork", "thread"} {
		if n := started(kind, 64); n >= 64 || n < 32 {
			t.Errorf("%s under --pids 64 (%s): %d started, want fewer than 64 (and the limit's, not fewer)", kind, caps.PidsBy, n)
		}
		if n := started(kind, 150); n <= 64 || n >= 150 {
			t.Errorf("%s under --pids 150 (%s): %d started, want more than 64 and fewer than 150", kind, caps.PidsBy, n)
		}
	}
}

func TestRefusesUnenforceableLimits(t *testing.T) {
	caps := (&native.Backend{}).Capabilities()
	if caps.Memory {
		t.Skip("this caller can enforce memory limits; the refusal path needs one that cannot (CI runs it as a non-root user)")
	}
	ws := t.TempDir()
	r := sh(t, ws, func(p *policy.Policy) { p.Limits.Memory = policy.Size(100 << 20) }, "echo SHOULD-NOT-RUN")
	if !errors.Is(r.err, sandbox.ErrRefused) || r.rep.ExitCode != 125 || strings.Contains(r.stdout, "SHOULD") {
		t.Fatalf("err %v exit %d stdout %q: want a refusal", r.err, r.rep.ExitCode, r.stdout)
	}
	if !strings.Contains(r.err.Error(), "--allow-degraded") {
		t.Errorf("refusal does not say how to proceed: %v", r.err)
	}
	// It says how to get a cgroup here: the commands, for this user.
	name := strconv.Itoa(os.Geteuid())
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	msg := r.err.Error()
	if !(strings.Contains(msg, "chown") && strings.Contains(msg, name)) && !strings.Contains(msg, "systemd-run --user --scope -p Delegate=yes") {
		t.Errorf("refusal does not say how %s gets a delegated cgroup here: %v", name, r.err)
	}
	// Refused, so not run degraded: the CLI prints "running degraded" for
	// each entry, which before a refusal said the opposite of what happened.
	if len(r.rep.Degraded) != 0 {
		t.Errorf("a refused run's report lists degradations %q", r.rep.Degraded)
	}
}

func TestNoSurvivors(t *testing.T) {
	ws := t.TempDir()
	marker := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000)
	r := sh(t, ws, nil, fmt.Sprintf(`setsid nohup sleep %s >/dev/null 2>&1 &
(sleep %s &) ; sleep 0.2; echo started`, marker, marker))
	mustExit(t, r, 0)
	// At once: by the time Run returns, they are dead and reaped (the
	// direct start's init kills and reaps them before it reports; the
	// init stage's run waits for init's exit, in which the kernel does).
	mustHaveNoSurvivors(t, "sleep "+marker)
}

// mustHaveNoSurvivors fails the test if a process whose command line
// contains marker is alive, and kills it.
func mustHaveNoSurvivors(t *testing.T, marker string) {
	t.Helper()
	if pids := proctest.Find(marker); len(pids) > 0 {
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		t.Fatalf("processes of the run survived: %v", pids)
	}
}

// TestLeftoversAreKilledBeforeTheReport: when the command exits, init
// kills what is left of the run and reaps it before it reports, so an
// orphan's CPU time is in the report (here a busy loop running for the
// command's 0.5 s, with the command itself idle), and nothing of the run
// is alive once Run has returned.
func TestLeftoversAreKilledBeforeTheReport(t *testing.T) {
	ws := t.TempDir()
	marker := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000)
	r := sh(t, ws, nil, fmt.Sprintf(`(sleep %s &) ; sh -c 'while :; do :; done' & sleep 0.5; echo started`, marker))
	mustExit(t, r, 0)
	mustHaveNoSurvivors(t, "sleep "+marker)
	// Uncounted, it would be the idle command's few milliseconds; the
	// bound leaves room for a loaded machine.
	if r.rep.CPUSeconds < 0.05 {
		t.Errorf("cpu_seconds %g: the busy loop killed at the end was not counted", r.rep.CPUSeconds)
	}
}

// TestInitEndsWithRun: a library caller's Run returns once init has ended
// (a next run in the same cgroup must not find it there).
// (The direct start's init waits, after its report, for the host to close
// the control pipe; the CLI leaves that to its own exit, see
// TestInitEndsWithMoat in cmd/moat.)
func TestInitEndsWithRun(t *testing.T) {
	for i := 0; i < 3; i++ {
		mustExit(t, run(t, t.TempDir(), nil, "/bin/true"), 0)
		// At once: init, even exiting, would still be in the caller's
		// cgroup.
		if kids := proctest.Children(os.Getpid()); len(kids) > 0 {
			t.Errorf("run %d: children of the test process alive when Run has returned: %v", i, kids)
		}
	}
	kids := proctest.Gone(func() []int { return proctest.Children(os.Getpid()) }, 3*time.Second)
	for _, p := range kids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	if len(kids) > 0 {
		t.Fatalf("children of the test process still alive 3 s after their runs: %v", kids)
	}
}

// TestConcurrentRuns: a program may run sandboxes side by side (an agent
// harness running several tools at once). Eight at a time, each in its
// own workspace, with and without a disk limit, and with and without cgroup
// limits where this caller may have them, every run gets its own output
// and files, and nothing is left behind: processes, mounts, cgroups. On a pure
// cgroup v2 host where the test process is alone in its cgroup (the
// guest's delegated step), a limited run moves it into a leaf to enable
// controllers; the runs without limits must then not be in its cgroup
// (cgroup v2 would refuse) nor in the leaf (it could not be removed): see
// native.Backend.OneAtATime.
func TestConcurrentRuns(t *testing.T) {
	mountsBefore := countLines("/proc/self/mountinfo")
	cgBefore := moatCgroups()
	home, _ := os.UserHomeDir()
	caps := (&native.Backend{}).Capabilities()
	if caps.PidsBy != backend.PidsCgroup {
		t.Logf("no run with cgroup limits: %s", cmp.Or(caps.PidsWhy, "pids by "+caps.PidsBy))
	}
	const workers, each = 8, 4
	errs := make(chan error, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		ws := t.TempDir()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				p := policy.Default()
				p.Workspace.Path = ws
				if (w+i)%2 == 1 {
					p.Limits.Disk = policy.Size(8 << 20)
				}
				if caps.Pids && (w+i)%3 == 0 {
					p.Limits.Pids = 64
					if caps.Memory {
						p.Limits.Memory = policy.Size(256 << 20)
					}
				}
				if err := p.Resolve(ws, home); err != nil {
					errs <- err
					return
				}
				token := fmt.Sprintf("run-%d-%d", w, i)
				var out, errb bytes.Buffer
				// The disk limit does not bound the direct workspace the
				// runs write to: they run degraded.
				rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p,
					Args:          []string{"/bin/sh", "-c", "echo " + token + " > f && cat f && echo " + token + " > /tmp/t && cat /tmp/t"},
					AllowDegraded: p.Limits.Disk > 0},
					backend.Stdio{Stdout: &out, Stderr: &errb})
				switch {
				case err != nil:
					errs <- fmt.Errorf("%s: %v\n%s", token, err, errb.String())
				case rep.ExitCode != 0 || out.String() != token+"\n"+token+"\n":
					errs <- fmt.Errorf("%s: exit %d (%s), stdout %q, stderr %q", token, rep.ExitCode, rep.Reason, out.String(), errb.String())
				}
				if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != token+"\n" {
					errs <- fmt.Errorf("%s: workspace file %q", token, b)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if kids := proctest.Gone(func() []int { return proctest.Children(os.Getpid()) }, 3*time.Second); len(kids) > 0 {
		for _, p := range kids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		t.Errorf("children of the test process alive 3 s after their runs: %v", kids)
	}
	if m := countLines("/proc/self/mountinfo"); m != mountsBefore {
		t.Errorf("host mounts: %d before, %d after", mountsBefore, m)
	}
	// Each run's cgroup, bare or limited, and moat's leaf are gone (fewer
	// is fine: runs sweep stale ones; see TestNoLeftovers).
	if c := moatCgroups(); c > cgBefore {
		t.Errorf("moat cgroups: %d before, %d after", cgBefore, c)
	}
}

func TestCancelKillsSandbox(t *testing.T) {
	p := workspacePolicy(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	rep, err := sandbox.Run(ctx, &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"sleep", "30"}}, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Reason != "killed" || time.Since(start) > 3*time.Second {
		t.Fatalf("reason %q after %v", rep.Reason, time.Since(start))
	}
}

func TestCommandNotFoundAndNotExecutable(t *testing.T) {
	ws := t.TempDir()
	r := run(t, ws, nil, "no-such-command-xyz")
	if !errors.Is(r.err, backend.ErrNotFound) || r.rep.ExitCode != 127 {
		t.Errorf("not found: err %v exit %d", r.err, r.rep.ExitCode)
	}
	os.WriteFile(filepath.Join(ws, "script"), []byte("#!/bin/sh\necho hi\n"), 0o644)
	r = run(t, ws, nil, "./script")
	if !errors.Is(r.err, backend.ErrNotExecutable) || r.rep.ExitCode != 126 {
		t.Errorf("not executable: err %v exit %d", r.err, r.rep.ExitCode)
	}
	var ie *backend.InitError
	if !errors.As(r.err, &ie) || !strings.HasPrefix(ie.Stage, "exec") {
		t.Errorf("no init stage in %v", r.err)
	}
}

func TestSignalExitCode(t *testing.T) {
	ws := t.TempDir()
	r := sh(t, ws, nil, "kill -TERM $$")
	if r.err != nil || r.rep.ExitCode != 128+15 || r.rep.Reason != "signal" || r.rep.Signal == nil || *r.rep.Signal != "SIGTERM" {
		t.Fatalf("err %v exit %d reason %s", r.err, r.rep.ExitCode, r.rep.Reason)
	}
}

func TestOnlyLoopbackNetwork(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serveGreeting(ln, "HOST-LISTENER\n")
	port := ln.Addr().(*net.TCPAddr).Port
	ws := t.TempDir()
	r := run(t, ws, nil, "python3", "-c", fmt.Sprintf(`
import socket, os
print(sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else 'nosys')
with open('/proc/net/dev') as f: print([l.split(':')[0].strip() for l in f.readlines()[2:]])
for host in ['127.0.0.1', '1.1.1.1', '10.0.0.1']:
    try:
        s = socket.create_connection((host, %d), timeout=1)
        print('CONNECTED', host, s.recv(100))
    except OSError as e:
        print('refused', host, e.errno)
own = socket.create_server(('127.0.0.1', 0))
c = socket.create_connection(own.getsockname(), timeout=1)
print('own loopback ok')
`, port))
	mustExit(t, r, 0)
	if strings.Contains(r.stdout, "CONNECTED") {
		t.Errorf("reached the network:\n%s", r.stdout)
	}
	// Each refusal is the one an empty network namespace gives (the host's
	// listener is not on this loopback; no route elsewhere), not a timeout
	// or a broken probe; and the same connect reaches a listener of the
	// sandbox's own, as it reaches the host's from here.
	for _, want := range []string{"refused 127.0.0.1 111\n", "refused 1.1.1.1 101\n", "refused 10.0.0.1 101\n", "own loopback ok\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q in:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	if c, err := net.Dial("tcp4", ln.Addr().String()); err != nil {
		t.Errorf("the host's listener is unreachable from the host too: %v", err)
	} else {
		c.Close()
	}
	if !strings.Contains(r.stdout, "['lo']") {
		t.Errorf("interfaces other than lo:\n%s", r.stdout)
	}

	// Init makes the network namespace after it starts, on one thread;
	// its other threads stay in the host's, hidden by hidepid. Through
	// no process or thread id the command can name may it see the host's
	// interfaces (init's threads have the lowest ids after 1).
	r = sh(t, ws, nil, `for p in $(seq 1 64); do tail -n +3 /proc/$p/net/dev 2>/dev/null | cut -d: -f1 | tr -d ' '; done | sort | uniq -c`)
	mustExit(t, r, 0)
	if f := strings.Fields(r.stdout); len(f) != 2 || f[1] != "lo" {
		t.Errorf("interfaces seen through the sandbox's process ids (count, name):\n%s%s", r.stdout, r.stderr)
	}
}

func TestProcIsMasked(t *testing.T) {
	ws := t.TempDir()
	masked := []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sysrq-trigger"}
	r := sh(t, ws, nil, probeSh+`for f in `+strings.Join(masked, " ")+`; do try_read $f; done
try_read /proc/self/status
try_write /proc/sysrq-trigger
ls /proc | grep -c '^[0-9]'`)
	mustExit(t, r, 0)
	wantOutcome(t, r.stdout, "DENIED", masked...)
	// The positive control: the probe reads an unmasked file of /proc.
	wantOutcome(t, r.stdout, "READ", "/proc/self/status")

	// The mask file belongs to the command's uid; only its read-only
	// mount keeps the command from opening it up (chmod) or writing into
	// it, which every masked path would then show.
	// The positive control: the same chmod and write work on a file of
	// the workspace.
	r = sh(t, ws, nil, probeSh+`echo x > own; chmod 600 own
for f in /proc/keys /etc/shadow $PWD/own; do
  if e=$(chmod 644 $f 2>&1); then echo "CHMOD $f"; else echo "chmod $f: $e"; fi
  try_write $f
done
grep -E ' /proc/keys | /etc/shadow ' /proc/self/mountinfo | cut -d' ' -f5,6`)
	mustExit(t, r, 0)
	if strings.Contains(r.stdout, "CHMOD /proc") || strings.Contains(r.stdout, "CHMOD /etc") || strings.Count(r.stdout, " ro,nosuid,nodev,noexec") != 2 {
		t.Errorf("a masked file is not a read-only, nosuid, nodev, noexec mount:\n%s", r.stdout)
	}
	if strings.Count(r.stdout, "Read-only file system") != 2 {
		t.Errorf("chmod of a masked file failed for another reason than its read-only mount:\n%s", r.stdout)
	}
	wantOutcome(t, r.stdout, "DENIED", "/proc/keys", "/etc/shadow")
	wantOutcome(t, r.stdout, "WROTE", ws+"/own")
	if !strings.Contains(r.stdout, "CHMOD "+ws+"/own\n") {
		t.Errorf("chmod of a workspace file failed:\n%s", r.stdout)
	}
}

func TestOnlyStdioInherited(t *testing.T) {
	ws := t.TempDir()
	r := run(t, ws, nil, "ls", "/proc/self/fd")
	mustExit(t, r, 0)
	// ls itself opens one directory fd.
	if got := strings.Fields(r.stdout); len(got) > 4 {
		t.Errorf("inherited fds: %v", got)
	}
}

// TestNoLeftovers runs many sandboxes, some killed, and checks the host
// keeps no mount, cgroup or temp directory of any of them.
func TestNoLeftovers(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 20
	}
	mountsBefore := countLines("/proc/self/mountinfo")
	tmpBefore := moatTemp()
	cgBefore := moatCgroups()
	ws := t.TempDir()
	// Where this caller can have cgroups, every other run asks for limits,
	// so that cgroups are made and removed too.
	caps := (&native.Backend{}).Capabilities()
	limited := func(p *policy.Policy) {
		if caps.Pids && caps.Memory {
			p.Limits.Pids = 64
			p.Limits.Memory = policy.Size(256 << 20)
		}
	}
	for i := 0; i < n; i++ {
		if i%2 == 1 && i%4 != 3 {
			mustExit(t, sh(t, ws, limited, "echo x > f; true"), 0)
			continue
		}
		if i%4 == 3 {
			r := sh(t, ws, func(p *policy.Policy) { p.Limits.Wall = policy.Duration(50 * time.Millisecond) }, "sleep 10")
			if r.err != nil || r.rep.Reason != "timeout" {
				t.Fatalf("run %d: %v %s", i, r.err, r.rep.Reason)
			}
			continue
		}
		mustExit(t, sh(t, ws, nil, "echo x > f; true"), 0)
	}
	if m := countLines("/proc/self/mountinfo"); m != mountsBefore {
		t.Errorf("host mounts: %d before, %d after", mountsBefore, m)
	}
	for name := range moatTemp() {
		if !tmpBefore[name] {
			t.Errorf("temporary entry left behind: %s", filepath.Join(os.TempDir(), name))
		}
	}
	// Fewer after is fine: a run sweeps the empty cgroups a moat killed
	// with SIGKILL could not remove (another test run's, here).
	if c := moatCgroups(); c > cgBefore {
		t.Errorf("moat cgroups: %d before, %d after", cgBefore, c)
	}
}

func countLines(p string) int {
	b, _ := os.ReadFile(p)
	return bytes.Count(b, []byte("\n"))
}

// moatTemp lists the temporary entries moat could have made. Entries
// that disappear meanwhile (another process's) do not matter: only new
// ones left behind are leftovers.
func moatTemp() map[string]bool {
	ents, _ := os.ReadDir(os.TempDir())
	out := map[string]bool{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "moat") && !testHarnessTemp(e.Name()) {
			out[e.Name()] = true
		}
	}
	return out
}

// testHarnessTemp says whether name is a temporary entry the tests of
// other packages make (go test runs packages side by side): their state
// directories (proctest.RunWithStateDir), built binaries, workspaces. No
// run makes one.
func testHarnessTemp(name string) bool {
	for _, p := range []string{"moat-state-", "moat-test-bin", "moat-mcp-ws-", "moattest-", "moat-tun-", "moat-goclient-", "moat-doctor-"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return strings.Contains(name, "-test-")
}

func moatCgroups() int {
	n := 0
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return filepath.SkipDir
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), "moat-") {
			n++
		}
		return nil
	})
	return n
}

func TestSeccompDefaultProfile(t *testing.T) {
	ws := t.TempDir()
	r := sh(t, ws, nil, `grep Seccomp: /proc/self/status
for o in -r -m; do if e=$(unshare $o true 2>&1); then echo ESCAPED-unshare$o; else echo "unshare$o: $e"; fi; done
python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, args in [("ptrace", (16, 1, 0, 0)), ("keyctl", (0, 0, 0, 0)), ("bpf", (0, 0, 0)), ("mount", (b"none", b"/tmp", b"tmpfs", 0, 0))]:
    rc = getattr(libc, name)(*args)
    print(name, rc, os.strerror(ctypes.get_errno()) if rc != 0 else "ALLOWED")
'
true`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "Seccomp:\t2") {
		t.Errorf("no seccomp filter on the command:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "ESCAPED") || strings.Contains(r.stdout, "ALLOWED") {
		t.Errorf("a denied system call worked:\n%s", r.stdout)
	}
	// unshare failed with the filter's EPERM, not for want of the tool;
	// and the same command works outside, so the filter is what stops it.
	for _, o := range []string{"-r", "-m"} {
		if !strings.Contains(r.stdout, "unshare"+o+": unshare: unshare failed: Operation not permitted") {
			t.Errorf("unshare %s did not fail with EPERM:\n%s", o, r.stdout)
		}
	}
	if out, err := exec.Command("unshare", "-r", "true").CombinedOutput(); err != nil {
		t.Errorf("unshare -r fails on the host too, so the check above proves nothing: %v %s", err, out)
	}
	if r.rep.Seccomp != "default" {
		t.Errorf("report seccomp %q", r.rep.Seccomp)
	}
	// The refusals are in the report, each with its rule.
	seen := map[string]backend.Denial{}
	for _, d := range r.rep.Denials {
		seen[d.What] = d
	}
	for _, name := range []string{"unshare", "ptrace"} {
		d, ok := seen[name]
		if !ok || d.Errno != "EPERM" || d.Rule == "" || d.Layer != "seccomp" || d.Profile != "default" || !strings.Contains(d.Hint, "--seccomp") {
			t.Errorf("denial of %s not reported with its rule: %+v (all: %+v)", name, d, r.rep.Denials)
		}
	}
}

// TestCommonToolsWork runs the everyday work of an agent's tools under the
// default policy (read-only system, seccomp, no network).
func TestCommonToolsWork(t *testing.T) {
	cases := []struct{ tool, script string }{
		{"git", `git init -q repo && cd repo && echo hi > f && git add f && git -c user.email=a@b -c user.name=a commit -qm first && git log --oneline | grep -q first`},
		{"gcc", `printf '#include <stdio.h>\nint main(void){puts("compiled");return 0;}\n' > h.c && gcc -o h h.c && ./h`},
		{"python3", `python3 -c 'import json, subprocess; print(json.dumps(subprocess.check_output(["echo", "py"]).decode()))'`},
		{"go", `mkdir -p gomod && cd gomod && printf 'module hello\n\ngo 1.21\n' > go.mod && printf 'package main\nimport "fmt"\nfunc main(){fmt.Println("gobuilt")}\n' > main.go && go build -o hello . && ./hello`},
		{"node", `node -e 'console.log(require("os").platform())'`},
		{"make", `printf 'all:\n\techo made\n' > Makefile && make -s`},
		{"curl", `curl --version >/dev/null`},
		{"pip3", `pip3 --version >/dev/null`},
		{"bash", `bash -c 'for i in 1 2 3; do echo $i; done | sort -r | head -1 | grep -q 3 && ls -la / >/dev/null && tar cf /tmp/x.tar . && sha256sum /tmp/x.tar >/dev/null'`},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			if _, err := exec.LookPath(c.tool); err != nil {
				t.Skipf("%s is not installed on this host", c.tool)
			}
			ws := t.TempDir()
			r := sh(t, ws, func(p *policy.Policy) { p.Limits.Wall = policy.Duration(2 * time.Minute) }, c.script)
			if r.err != nil || r.rep.ExitCode != 0 {
				t.Fatalf("%s failed (exit %d, %v):\n%s%s", c.tool, r.rep.ExitCode, r.err, r.stdout, r.stderr)
			}
		})
	}
}

// TestDiskLimit: a command writing 50 MiB under a 10 MiB disk limit gets
// ENOSPC, the run ends with reason disk, and the host is unaffected. The
// workspace is read-only: a writable one is not under the limit (see
// TestDiskLimitCoversEveryWrite).
func TestDiskLimit(t *testing.T) {
	disk := func(p *policy.Policy) {
		p.Limits.Disk = policy.Size(10 << 20)
		p.Workspace.Mode = policy.WorkspaceReadOnly
	}
	for _, dir := range []string{"/tmp", "$HOME", "/dev/shm"} {
		t.Run(strings.Trim(dir, "/$"), func(t *testing.T) {
			ws := t.TempDir()
			r := sh(t, ws, disk, "head -c 50000000 /dev/zero > "+dir+"/big")
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.rep.Reason != "disk" || !strings.Contains(r.stderr, "No space left") {
				t.Fatalf("reason %q exit %d stderr %q: want disk and ENOSPC", r.rep.Reason, r.rep.ExitCode, r.stderr)
			}
		})
	}
	// The limit is shared: 6 MiB in /tmp and 6 MiB in home do not fit in 10.
	ws := t.TempDir()
	r := sh(t, ws, disk, "head -c 6000000 /dev/zero > /tmp/a && head -c 6000000 /dev/zero > $HOME/b")
	if r.err != nil || r.rep.Reason != "disk" {
		t.Fatalf("shared limit: %v reason %q", r.err, r.rep.Reason)
	}
}

// TestDiskLimitCoversEveryWrite: a disk limit with somewhere the command
// writes in place on the host (a direct or copy workspace, a read_write
// path) is refused, naming where, since the limit's tmpfs cannot hold
// those writes; --allow-degraded runs it and lists the gap, and the
// command then writes past the limit there (the gap is real) but not in
// /tmp. An overlay workspace, whose changes go to the limit's tmpfs, is
// not refused and its writes stop at the limit.
func TestDiskLimitCoversEveryWrite(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	const write = "head -c 8000000 /dev/zero > big && echo WROTE"
	rw := t.TempDir()
	for _, c := range []struct {
		name, where string
		edit        func(*policy.Policy)
	}{
		{"direct", "", func(p *policy.Policy) {}},
		{"copy", "", func(p *policy.Policy) { p.Workspace.Mode = policy.WorkspaceCopy }},
		{"read_write", rw, func(p *policy.Policy) {
			p.Workspace.Mode = policy.WorkspaceReadOnly
			p.Filesystem.ReadWrite = append(p.Filesystem.ReadWrite, rw)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := t.TempDir()
			where := c.where
			if where == "" {
				where = ws
			}
			edit := func(p *policy.Policy) {
				p.Limits.Disk = policy.Size(2 << 20)
				c.edit(p)
			}
			script := "cd " + where + " && " + write
			r := sh(t, ws, edit, script)
			if !errors.Is(r.err, sandbox.ErrRefused) || strings.Contains(r.stdout, "WROTE") {
				t.Fatalf("err %v stdout %q: want a refusal", r.err, r.stdout)
			}
			for _, want := range []string{"--disk", where, "overlay", "--allow-degraded"} {
				if !strings.Contains(r.err.Error(), want) {
					t.Errorf("refusal does not say %q: %v", want, r.err)
				}
			}
			r = runDegraded(t, ws, edit, script+"; head -c 8000000 /dev/zero > /tmp/big")
			if r.err != nil || !strings.Contains(r.stdout, "WROTE") || r.rep.Reason != "disk" {
				t.Fatalf("allow degraded: err %v reason %q stdout %q stderr %q: want the write in place and ENOSPC in /tmp", r.err, r.rep.Reason, r.stdout, r.stderr)
			}
			if len(r.rep.Degraded) != 1 || !strings.Contains(r.rep.Degraded[0], where) {
				t.Errorf("degraded %q, want the disk limit on %s", r.rep.Degraded, where)
			}
		})
	}
	t.Run("overlay", func(t *testing.T) {
		ws := t.TempDir()
		r := sh(t, ws, func(p *policy.Policy) {
			p.Limits.Disk = policy.Size(2 << 20)
			p.Workspace.Mode = policy.WorkspaceOverlay
		}, write)
		if r.err != nil || r.rep.Reason != "disk" || strings.Contains(r.stdout, "WROTE") {
			t.Fatalf("err %v reason %q stdout %q: want ENOSPC in the overlay", r.err, r.rep.Reason, r.stdout)
		}
	})
}

// runDegraded is run with AllowDegraded.
func runDegraded(t *testing.T, ws string, edit func(*policy.Policy), script string) result {
	t.Helper()
	p := policy.Default()
	p.Workspace.Path = ws
	edit(p)
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	var out, errb bytes.Buffer
	rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p,
		Args: []string{"/bin/sh", "-c", script}, AllowDegraded: true}, backend.Stdio{Stdout: &out, Stderr: &errb})
	if rep == nil {
		t.Fatalf("nil report (err %v)", err)
	}
	return result{rep, err, out.String(), errb.String()}
}

func TestLandlockSettings(t *testing.T) {
	ws := t.TempDir()
	r := run(t, ws, nil, "true")
	mustExit(t, r, 0)
	kernel := r.rep.LandlockABI
	if kernel == 0 {
		// auto on a kernel without Landlock: runs, and says so.
		if len(r.rep.Warnings) == 0 {
			t.Error("no warning on a kernel without Landlock")
		}
		r = run(t, ws, func(p *policy.Policy) { p.Filesystem.Landlock = policy.LandlockRequired }, "true")
		if !errors.Is(r.err, sandbox.ErrRefused) {
			t.Errorf("required on a kernel without Landlock: %v", r.err)
		}
		return
	}
	r = run(t, ws, func(p *policy.Policy) { p.Filesystem.Landlock = policy.LandlockOff }, "true")
	mustExit(t, r, 0)
	if r.rep.LandlockABI != 0 || len(r.rep.Warnings) == 0 {
		t.Errorf("landlock off: abi %d warnings %v", r.rep.LandlockABI, r.rep.Warnings)
	}
	r = run(t, ws, func(p *policy.Policy) { p.Filesystem.Landlock = policy.LandlockRequired }, "true")
	mustExit(t, r, 0)
	if r.rep.LandlockABI != kernel {
		t.Errorf("landlock required: abi %d", r.rep.LandlockABI)
	}
}

// tcpProbe tries, inside the sandbox, to listen on each port of bind and to
// connect to each port of connect on 127.0.0.1, and prints one line per
// try: "bind PORT ok|ERRNO" or "connect PORT ok|ERRNO". A connect to a port
// nobody listens on is ECONNREFUSED when allowed and EACCES when Landlock
// refuses it.
const tcpProbe = `
import errno, socket, sys
bind, connect = sys.argv[1], sys.argv[2]
keep = []
for p in [int(x) for x in bind.split(",") if x]:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); s.listen(); keep.append(s); print("bind", p, "ok")
    except OSError as e:
        print("bind", p, errno.errorcode[e.errno])
for p in [int(x) for x in connect.split(",") if x]:
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", p)); print("connect", p, "ok")
    except OSError as e:
        print("connect", p, errno.errorcode[e.errno])
`

// TestLandlockTCPPorts: with network.tcp_bind and tcp_connect set, Landlock
// refuses every other port, on loopback too; unset, loopback servers work.
// A kernel without Landlock ABI 4 must refuse such a run, not run it
// unrestricted.
func TestLandlockTCPPorts(t *testing.T) {
	ws := t.TempDir()
	ports := func(bind, connect []int) func(*policy.Policy) {
		return func(p *policy.Policy) { p.Network.TCPBind, p.Network.TCPConnect = &bind, &connect }
	}
	probe := func(edit func(*policy.Policy), bind, connect string) result {
		return run(t, ws, edit, "python3", "-c", tcpProbe, bind, connect)
	}
	r := probe(nil, "18080,18081", "18080,18082")
	mustExit(t, r, 0)
	if want := "bind 18080 ok\nbind 18081 ok\nconnect 18080 ok\nconnect 18082 ECONNREFUSED\n"; r.stdout != want {
		t.Errorf("without port rules:\n%s\nwant:\n%s", r.stdout, want)
	}

	kernel := r.rep.LandlockABI // the default policy applies all the kernel has
	r = probe(ports([]int{18080}, []int{18080}), "18080,18081", "18080,18082")
	if kernel < 4 {
		if !errors.Is(r.err, sandbox.ErrRefused) || !strings.Contains(r.err.Error(), "TCP port rules") {
			t.Fatalf("Landlock ABI %d: TCP port rules must be refused, got %v", kernel, r.err)
		}
		t.Logf("Landlock ABI %d: TCP port rules refused, as they must be (enforcement not testable here)", kernel)
		return
	}
	mustExit(t, r, 0)
	if want := "bind 18080 ok\nbind 18081 EACCES\nconnect 18080 ok\nconnect 18082 EACCES\n"; r.stdout != want {
		t.Errorf("tcp_bind [18080], tcp_connect [18080]:\n%s\nwant:\n%s", r.stdout, want)
	}

	// Empty lists: no TCP at all, not even loopback.
	r = probe(ports([]int{}, []int{}), "18080", "18080")
	mustExit(t, r, 0)
	if want := "bind 18080 EACCES\nconnect 18080 EACCES\n"; r.stdout != want {
		t.Errorf("empty port lists:\n%s\nwant:\n%s", r.stdout, want)
	}

	// In allow mode the proxy stays reachable whatever tcp_connect says.
	r = probe(func(p *policy.Policy) {
		p.Network.Mode = policy.NetworkAllow
		ports([]int{}, []int{})(p)
	}, "", fmt.Sprintf("%d,18082", sandbox.ProxyPort))
	mustExit(t, r, 0)
	if want := fmt.Sprintf("connect %d ok\nconnect 18082 EACCES\n", sandbox.ProxyPort); r.stdout != want {
		t.Errorf("allow mode, tcp_connect []:\n%s\nwant:\n%s", r.stdout, want)
	}
}

// TestTIOCSTIRefused: pushing keystrokes into a terminal is refused, on a
// real pseudo-terminal the command opens itself, as it would be on the
// caller's terminal.
func TestTIOCSTIRefused(t *testing.T) {
	ws := t.TempDir()
	r := run(t, ws, nil, "python3", "-c", `
import fcntl, os, pty, termios
master, slave = pty.openpty()
try:
    fcntl.ioctl(slave, termios.TIOCSTI, b"x")
    print("INJECTED")
except OSError as e:
    print("refused", e.errno)
`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "refused 1") {
		t.Fatalf("TIOCSTI on a terminal was not refused with EPERM:\n%s%s", r.stdout, r.stderr)
	}
}

// failingWriter stands for a reader that went away (yes | head).
type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n += len(p); w.n > 1000 {
		return 0, errors.New("reader gone")
	}
	return len(p), nil
}

// TestOutputReaderGone: when nobody reads the output any more, the
// command gets SIGPIPE as it would outside, instead of running on.
func TestOutputReaderGone(t *testing.T) {
	p := workspacePolicy(t, t.TempDir())
	p.Limits.Wall = policy.Duration(10 * time.Second)
	start := time.Now()
	rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"yes"}},
		backend.Stdio{Stdout: &failingWriter{}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Signal == nil || *rep.Signal != "SIGPIPE" || time.Since(start) > 5*time.Second {
		t.Fatalf("reason %s signal %v after %v: want SIGPIPE at once", rep.Reason, rep.Signal, time.Since(start))
	}
}

func TestStdinReachesCommand(t *testing.T) {
	p := workspacePolicy(t, t.TempDir())
	var out bytes.Buffer
	rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"sh", "-c", "tr a-z A-Z; echo done"}},
		backend.Stdio{Stdin: strings.NewReader("hello from stdin\n"), Stdout: &out})
	if err != nil || rep.ExitCode != 0 || out.String() != "HELLO FROM STDIN\ndone\n" {
		t.Fatalf("err %v exit %d out %q", err, rep.ExitCode, out.String())
	}
}

// TestSymlinkedWorkspace: a workspace reached through an absolute symlink
// is bound from its real place and seen at the path the user gave.
func TestSymlinkedWorkspace(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "ws-link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	r := sh(t, link, nil, "pwd; echo hi > made.txt")
	mustExit(t, r, 0)
	if strings.TrimSpace(r.stdout) != link {
		t.Errorf("pwd %q, want %s", r.stdout, link)
	}
	if _, err := os.Stat(filepath.Join(real, "made.txt")); err != nil {
		t.Errorf("write did not land in the real directory: %v", err)
	}
}

// TestProtectedPathThroughSymlink: a .git/hooks that links elsewhere in
// the workspace is protected where it leads, since git follows the link.
func TestProtectedPathThroughSymlink(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	os.MkdirAll(filepath.Join(ws, "myhooks"), 0o755)
	os.Symlink("../myhooks", filepath.Join(ws, ".git/hooks"))
	r := sh(t, ws, nil, `if echo evil > myhooks/pre-commit 2>/dev/null; then echo WROTE; fi; echo ok > other.txt && echo other-ok`)
	mustExit(t, r, 0)
	if strings.Contains(r.stdout, "WROTE") || !strings.Contains(r.stdout, "other-ok") {
		t.Fatalf("hook planted through the symlink:\n%s%s", r.stdout, r.stderr)
	}
}

// TestHostAbstractSocketUnreachable: abstract unix sockets (X11, D-Bus,
// container runtimes listen on them) belong to the network namespace, so
// the host's are out of reach.
func TestHostAbstractSocketUnreachable(t *testing.T) {
	name := fmt.Sprintf("moat-test-%d", time.Now().UnixNano())
	ln, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Skipf("cannot listen on an abstract socket here: %v", err)
	}
	defer ln.Close()
	serveGreeting(ln, "HOST-SOCKET\n")
	ws := t.TempDir()
	r := run(t, ws, nil, "python3", "-c", fmt.Sprintf(`
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0%s")
    print("CONNECTED", s.recv(100))
except OSError as e:
    print("refused", e.errno)
own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
own.bind("\0%s-own")
own.listen()
socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect("\0%s-own")
print("own abstract ok")
`, name, name, name))
	mustExit(t, r, 0)
	// ECONNREFUSED: no such name in the sandbox's namespace. The same
	// connect reaches an abstract socket of the sandbox's own, and the
	// host's from here.
	if !strings.Contains(r.stdout, "refused 111\n") || !strings.Contains(r.stdout, "own abstract ok\n") {
		t.Fatalf("reached the host's abstract socket, or the probe broke:\n%s%s", r.stdout, r.stderr)
	}
	c, err := net.Dial("unix", "@"+name)
	if err != nil {
		t.Fatalf("the host's abstract socket is unreachable from the host too: %v", err)
	}
	c.Close()
}

// TestCommandHasAName: the command's uid is "agent" in /etc/passwd (read
// only), so tools that look the user up work and no host name leaks in.
func TestCommandHasAName(t *testing.T) {
	ws := t.TempDir()
	r := sh(t, ws, nil, probeSh+`id -un; id -gn; getent passwd agent | cut -d: -f6; try_write /etc/passwd; try_write "$HOME/.profile"`)
	mustExit(t, r, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 5 || lines[0] != "agent" || lines[1] != "agent" || lines[2] != "/home/agent" {
		t.Errorf("identity inside:\n%s%s", r.stdout, r.stderr)
	}
	// /etc/passwd is read-only; the control, a file in the command's own
	// home, is not.
	wantOutcome(t, r.stdout, "DENIED", "/etc/passwd")
	wantOutcome(t, r.stdout, "WROTE", "/home/agent/.profile")
}

// TestCreatedProtectedPathsReported: in direct mode a protected path that
// is missing at the start cannot be made read-only, so the command can
// create it; the report must say so rather than stay silent.
func TestCreatedProtectedPathsReported(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte("export A=1\n"), 0o644) // exists: read-only
	r := sh(t, ws, nil, `mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit; echo 2 >> .envrc 2>/dev/null; echo fine > ok.txt`)
	mustExit(t, r, 0)
	if want := []string{".git/hooks"}; !slices.Equal(r.rep.ProtectedCreated, want) {
		t.Errorf("protected_created = %q, want %q", r.rep.ProtectedCreated, want)
	}
	if !slices.ContainsFunc(r.rep.Warnings, func(w string) bool { return strings.Contains(w, ".git/hooks") }) {
		t.Errorf("no warning names .git/hooks: %q", r.rep.Warnings)
	}
	// Nothing created, nothing reported.
	r = sh(t, t.TempDir(), nil, `echo fine > ok.txt`)
	mustExit(t, r, 0)
	if len(r.rep.ProtectedCreated) != 0 {
		t.Errorf("protected_created = %q for a run that created none", r.rep.ProtectedCreated)
	}
}

// TestWritablePathsHeldToWorkspaceRule: --rw /, a writable path that
// holds the caller's home, and one in or above the host's system files
// are refused, as such a workspace is, with the flag named; a directory
// beside the home is fine.
func TestWritablePathsHeldToWorkspaceRule(t *testing.T) {
	base := t.TempDir()
	home, other, ws := filepath.Join(base, "home", "me"), filepath.Join(base, "other"), t.TempDir()
	os.MkdirAll(filepath.Join(home, ".cache"), 0o755) // a read-write path must exist
	os.Mkdir(other, 0o755)
	os.Symlink(filepath.Join(base, "home"), filepath.Join(base, "link"))
	c := sandbox.Caller{UID: 1000, GID: 1000, Home: home, Cwd: ws}
	for rw, want := range map[string]string{
		"/":                           "is /",
		filepath.Join(base, "home"):   "contains your home directory",
		home:                          "contains your home directory",
		filepath.Join(base, "link"):   "contains your home directory",
		other:                         "",
		filepath.Join(home, ".cache"): "",
		// The host's system files: as root, code that runs as root.
		"/etc":           "is /etc, the host's own system files",
		"/usr/local/bin": "is in /usr, the host's own system files",
		"/var":           "contains /var/lib, the host's own system files",
	} {
		p := policy.Default()
		p.Workspace.Path = ws
		p.Filesystem.ReadWrite = []string{rw}
		p.MarkFlag("filesystem.read_write", "--rw")
		_, err := sandbox.Compile(p, []string{"true"}, c, "run", nil, nil)
		switch {
		case want == "" && err != nil:
			t.Errorf("--rw %s: %v", rw, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "flag --rw: filesystem.read_write[0]")):
			t.Errorf("--rw %s: %v, want an error naming --rw and containing %q", rw, err, want)
		}
	}
}

// TestWorkspaceLinkHeldToRule: a workspace reached through a symlink is
// held to the rule by what it names: a link to /, to a directory that
// holds the caller's home, or to the host's system files is refused as
// those themselves are. The control: a link to a directory beside the
// home compiles.
func TestWorkspaceLinkHeldToRule(t *testing.T) {
	base := t.TempDir()
	home, other := filepath.Join(base, "home", "me"), filepath.Join(base, "other")
	os.MkdirAll(home, 0o755)
	os.Mkdir(other, 0o755)
	for name, target := range map[string]string{"root": "/", "homes": filepath.Join(base, "home"), "home": home, "other": other, "etc": "/etc"} {
		if err := os.Symlink(target, filepath.Join(base, "to-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	c := sandbox.Caller{UID: 1000, GID: 1000, Home: home}
	for ws, want := range map[string]string{
		"/":                             "workspace is /",
		filepath.Join(base, "to-root"):  "is /: it would expose the whole host",
		filepath.Join(base, "to-homes"): "contains your home directory",
		filepath.Join(base, "to-home"):  "contains your home directory",
		filepath.Join(base, "to-other"): "",
		"/dev/shm":                      "which the sandbox has its own of",
		"/proc/self":                    "which the sandbox has its own of",
		"/etc":                          "is /etc, the host's own system files",
		"/usr/share":                    "is in /usr, the host's own system files",
		"/home":                         "is /home, every user's home directory",
		filepath.Join(base, "to-etc"):   "is /etc, the host's own system files",
	} {
		p := policy.Default()
		p.Workspace.Path = ws
		c.Cwd = ws
		_, err := sandbox.Compile(p, []string{"true"}, c, "run", nil, nil)
		switch {
		case want == "" && err != nil:
			t.Errorf("workspace %s: %v", ws, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("workspace %s: %v, want an error containing %q", ws, err, want)
		}
	}
}

// TestCopyKeepsOwners: as root, a copy-mode workspace shows the command
// what the workspace itself would: the workspace's owner's files as its
// own, and another user's closed directory closed. The copy used to be
// all root's, mapped whole to the command's user, which then read a
// directory its owner had closed (tried). The control is the same probe
// in overlay mode, and the owner's own files, readable in both.
func TestCopyKeepsOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root copies files it does not own (an ordinary caller's copy is its own)")
	}
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	const uid, gid = 12345, 12346
	ws := t.TempDir()
	closed := filepath.Join(ws, "closed")
	for _, f := range []struct {
		path string
		dir  bool
		uid  int
		mode os.FileMode
	}{
		{ws, true, uid, 0o755},
		{filepath.Join(ws, "mine"), false, uid, 0o600},
		{closed, true, 0, 0o700},
		{filepath.Join(closed, "secret"), false, 0, 0o600},
	} {
		if !f.dir {
			if err := os.WriteFile(f.path, []byte("content\n"), f.mode); err != nil {
				t.Fatal(err)
			}
		} else if f.path != ws {
			if err := os.Mkdir(f.path, f.mode); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(f.path, f.uid, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f.path, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	const probe = "stat -c %u mine closed; cat mine; cat closed/secret 2>/dev/null || echo CLOSED"
	const want = "1000\n65534\ncontent\nCLOSED\n"
	for _, mode := range []string{policy.WorkspaceOverlay, policy.WorkspaceCopy} {
		r := sh(t, ws, func(p *policy.Policy) { p.Workspace.Mode = mode }, "cd "+ws+" && "+probe)
		mustExit(t, r, 0)
		if r.stdout != want {
			t.Errorf("%s: the command sees %q, want %q", mode, r.stdout, want)
		}
	}
}

// TestDaemonSocketInSightRefused: a run whose command would see the unix
// socket of a moat daemon (one at $MOAT_SOCKET, one a daemon recorded in
// the state directory, and one moat mcp's server recorded) under a read-only path is refused before
// anything runs, naming the socket: connecting needs no write access, and
// the daemon would know the command as the caller. The controls: the same
// path with the socket denied runs, and the command cannot reach the
// socket there; a run that does not show it runs; and the probe reaches
// the socket from the host.
func TestDaemonSocketInSightRefused(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	for _, known := range []string{"MOAT_SOCKET", "recorded", "recorded by moat mcp"} {
		t.Run(known, func(t *testing.T) {
			ws, dir, state := t.TempDir(), t.TempDir(), t.TempDir()
			os.Chmod(dir, 0o755)
			sock := filepath.Join(dir, "moat.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			os.Chmod(sock, 0o777)
			serveGreeting(ln, "the daemon answers")
			t.Setenv("MOAT_STATE_DIR", state)
			switch known {
			case "MOAT_SOCKET":
				t.Setenv("MOAT_SOCKET", sock)
			case "recorded":
				err = sandbox.RecordDaemonSockets(state, []string{sock})
			default:
				err = sandbox.RecordDaemonSockets(filepath.Join(state, "mcp", "session-1"), []string{sock})
			}
			if err != nil {
				t.Fatal(err)
			}
			probe := []string{"python3", "-c", `import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print(s.recv(100).decode())
except OSError as e:
    print("refused:", e)`, sock}
			if out, err := exec.Command(probe[0], probe[1:]...).Output(); err != nil || !strings.Contains(string(out), "the daemon answers") {
				t.Fatalf("the probe does not reach the socket from the host: %q %v", out, err)
			}

			r := run(t, ws, func(p *policy.Policy) { p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, dir) }, probe...)
			if r.err == nil || !strings.Contains(r.err.Error(), "daemon's socket "+sock) {
				t.Errorf("shown: err %v, stdout %q; want a refusal naming %s", r.err, r.stdout, sock)
			}
			if strings.Contains(r.stdout, "the daemon answers") {
				t.Errorf("the command reached the daemon's socket: %q", r.stdout)
			}

			r = run(t, ws, func(p *policy.Policy) {
				p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, dir)
				p.Filesystem.Deny = append(p.Filesystem.Deny, sock)
			}, probe...)
			mustExit(t, r, 0)
			if !strings.Contains(r.stdout, "refused") {
				t.Errorf("denied: the command reached the socket: %q", r.stdout)
			}

			r = run(t, ws, nil, probe...)
			mustExit(t, r, 0)
			if !strings.Contains(r.stdout, "refused") {
				t.Errorf("not shown: %q", r.stdout)
			}
		})
	}
}

// TestReadOnlyLinkInWorkspace: a read-only path that is a symbolic link
// in a tree the sandbox shows already (the workspace) is refused, naming
// the link and what to name instead; the run failed on "file exists"
// before. The control: the directory it leads to, named, is read-only.
func TestReadOnlyLinkInWorkspace(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(ws, "l")); err != nil {
		t.Fatal(err)
	}
	r := sh(t, ws, func(p *policy.Policy) { p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, filepath.Join(ws, "l")) }, "true")
	if r.err == nil || !strings.Contains(r.err.Error(), "is a symbolic link (to sub)") || !strings.Contains(r.err.Error(), "name that path instead") {
		t.Errorf("a read-only link in the workspace: %v, want a refusal naming it", r.err)
	}
	named := func(p *policy.Policy) {
		p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, filepath.Join(ws, "sub"))
	}
	r = sh(t, ws, named, "cd "+ws+" && ls -d l/ && touch sub/x 2>/dev/null || echo READONLY")
	mustExit(t, r, 0)
	if r.stdout != "l/\nREADONLY\n" {
		t.Errorf("the named directory: %q, want it shown through the link and read-only", r.stdout)
	}
}

// TestMissingProtectionRefused: a filesystem.deny or filesystem.read_only
// path that does not exist in a tree the command may write (the
// workspace, a read_write path) is refused, naming the field, and the
// command does not run: before, the backend skipped it and the command
// made the path on the host and used it. The controls: the same paths
// once they exist are hidden or read-only; a missing path where the
// command can create nothing (outside every tree, below a read-only path,
// in a read-only workspace) runs.
func TestMissingProtectionRefused(t *testing.T) {
	ws, rw := t.TempDir(), t.TempDir()
	plant := "echo planted > " + ws + "/secret; mkdir " + ws + "/conf; echo planted > " + rw + "/x"
	for name, edit := range map[string]func(*policy.Policy){
		"filesystem.deny[2]": func(p *policy.Policy) { p.Filesystem.Deny = append(p.Filesystem.Deny, filepath.Join(ws, "secret")) },
		"filesystem.read_only[6]": func(p *policy.Policy) {
			p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, filepath.Join(ws, "conf"))
		},
		"filesystem.deny[3]": func(p *policy.Policy) {
			p.Filesystem.ReadWrite = append(p.Filesystem.ReadWrite, rw)
			p.Filesystem.Deny = append(p.Filesystem.Deny, "/nonexistent/x", filepath.Join(rw, "x"))
		},
	} {
		r := sh(t, ws, edit, plant)
		if r.err == nil || !strings.Contains(r.err.Error(), name+": ") || !strings.Contains(r.err.Error(), "does not exist") {
			t.Errorf("%s missing in a writable tree: %v, want a refusal naming it", name, r.err)
		}
	}
	for _, p := range []string{filepath.Join(ws, "secret"), filepath.Join(ws, "conf"), filepath.Join(rw, "x")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("a refused run created %s", p)
		}
	}

	// Where the command can create nothing, a missing path is no hole.
	os.Mkdir(filepath.Join(ws, "ro"), 0o755)
	r := sh(t, ws, func(p *policy.Policy) {
		p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, "/nonexistent/y", filepath.Join(ws, "ro"))
		p.Filesystem.Deny = append(p.Filesystem.Deny, "/nonexistent/x", filepath.Join(ws, "ro", "x"))
	}, "touch ro/x 2>/dev/null || echo READONLY")
	mustExit(t, r, 0)
	if r.stdout != "READONLY\n" {
		t.Errorf("below a read-only path: %q", r.stdout)
	}
	r = sh(t, ws, func(p *policy.Policy) {
		p.Workspace.Mode = policy.WorkspaceReadOnly
		p.Filesystem.Deny = append(p.Filesystem.Deny, filepath.Join(ws, "secret"))
	}, "true")
	mustExit(t, r, 0)

	// Once they exist, the same paths are protected, and the same probe
	// without them reads and writes (so the probe works).
	os.WriteFile(filepath.Join(ws, "secret"), []byte("TOKEN\n"), 0o644)
	os.Mkdir(filepath.Join(ws, "conf"), 0o755)
	probe := "cat secret 2>/dev/null || echo HIDDEN; touch conf/y 2>/dev/null && echo WROTE || echo READONLY"
	r = sh(t, ws, func(p *policy.Policy) {
		p.Filesystem.Deny = append(p.Filesystem.Deny, filepath.Join(ws, "secret"))
		p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, filepath.Join(ws, "conf"))
	}, probe)
	mustExit(t, r, 0)
	if r.stdout != "HIDDEN\nREADONLY\n" {
		t.Errorf("the existing paths: %q, want them hidden and read-only", r.stdout)
	}
	r = sh(t, ws, nil, probe)
	mustExit(t, r, 0)
	if r.stdout != "TOKEN\nWROTE\n" {
		t.Errorf("without the rules: %q, want the probe to read and write", r.stdout)
	}
}

// TestStateDirHeldToWorkspaceRule: a workspace or a writable path that
// holds moat's state directory (where the trusted policies are) is
// refused, as one that holds the home is; so is one inside it (a command
// there wrote a daemon's session records, which the next daemon acted on
// as root; found by a tester), but for a workspace moat made there
// (Caller.StateWorkspace) and the paths in it. A directory beside it
// compiles.
func TestStateDirHeldToWorkspaceRule(t *testing.T) {
	base := t.TempDir()
	state, other := filepath.Join(base, "state"), filepath.Join(base, "other")
	inside := filepath.Join(state, "made")
	os.MkdirAll(filepath.Join(inside, "sub"), 0o755)
	os.Mkdir(filepath.Join(state, "x"), 0o755)
	os.Mkdir(other, 0o755)
	os.Symlink(base, filepath.Join(other, "link"))
	os.Symlink(inside, filepath.Join(other, "in"))
	t.Setenv("MOAT_STATE_DIR", state)
	ws := t.TempDir()
	for _, tc := range []struct {
		ws, rw string
		made   bool
		want   string
	}{
		{ws, base, false, "contains moat's state directory"},
		{ws, state, false, "inside moat's state directory"},
		{ws, filepath.Join(other, "link"), false, "contains moat's state directory"},
		{ws, inside, false, "inside moat's state directory"},
		{ws, filepath.Join(other, "in"), false, "inside moat's state directory"},
		{ws, other, false, ""},
		{inside, filepath.Join(inside, "sub"), true, ""},
		{inside, filepath.Join(state, "x"), true, "inside moat's state directory"},
	} {
		p := policy.Default()
		p.Workspace.Path = tc.ws
		p.Filesystem.ReadWrite = []string{tc.rw}
		p.MarkFlag("filesystem.read_write", "--rw")
		c := sandbox.Caller{UID: 1000, GID: 1000, Cwd: tc.ws, StateWorkspace: tc.made}
		_, err := sandbox.Compile(p, []string{"true"}, c, "run", nil, nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("--rw %s: %v", tc.rw, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "flag --rw: filesystem.read_write[0]")):
			t.Errorf("--rw %s: %v, want an error naming --rw and containing %q", tc.rw, err, tc.want)
		}
	}
	for _, tc := range []struct {
		ws   string
		made bool
		want string
	}{
		{base, false, "contains moat's state directory"},
		{state, false, "inside moat's state directory"},
		{inside, false, "inside moat's state directory"},
		{filepath.Join(other, "in"), false, "inside moat's state directory"},
		{inside, true, ""},
		{other, false, ""},
	} {
		p := policy.Default()
		p.Workspace.Path = tc.ws
		_, err := sandbox.Compile(p, []string{"true"}, sandbox.Caller{UID: 1000, GID: 1000, Cwd: tc.ws, StateWorkspace: tc.made}, "run", nil, nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("workspace %s (made %v): %v", tc.ws, tc.made, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("workspace %s: %v, want %q", tc.ws, err, tc.want)
		}
	}
}

// TestOverlayWithoutChangesKeepsNothing: an overlay run whose command
// wrote nothing leaves no change set (nothing to review, nothing in moat
// runs); the control: one that wrote keeps its change set, with the file.
func TestOverlayWithoutChangesKeepsNothing(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644)
	overlay := func(p *policy.Policy) { p.Workspace.Mode = policy.WorkspaceOverlay }
	r := sh(t, ws, overlay, "cat a.txt >/dev/null")
	mustExit(t, r, 0)
	if r.rep.ChangeSet != nil {
		t.Errorf("a run that wrote nothing kept change set %+v", r.rep.ChangeSet)
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "runs")); len(ents) != 0 {
		t.Errorf("change sets left: %v", ents)
	}
	r = sh(t, ws, overlay, "echo b > b.txt")
	mustExit(t, r, 0)
	if r.rep.ChangeSet == nil {
		t.Fatal("control: a run that wrote kept no change set")
	}
	if _, err := os.Stat(filepath.Join(r.rep.ChangeSet.Dir, "upper", "b.txt")); err != nil {
		t.Errorf("control: the change set lacks the file: %v", err)
	}
}

// TestEmptyCommandName: a command line whose program is "" is refused by
// name, not run into the kernel's EACCES; the control: "true".
func TestEmptyCommandName(t *testing.T) {
	ws := t.TempDir()
	p := policy.Default()
	p.Workspace.Path = ws
	c := sandbox.Caller{UID: 1000, GID: 1000, Cwd: ws}
	if _, err := sandbox.Compile(p, []string{""}, c, "run", nil, nil); err == nil || !strings.Contains(err.Error(), "name is empty") {
		t.Errorf("an empty program name: %v", err)
	}
	if _, err := sandbox.Compile(p, []string{"true"}, c, "run", nil, nil); err != nil {
		t.Errorf("control: %v", err)
	}
}

// TestReadOnlyLinkToNothingWarned: a read_only path that is a symbolic
// link is made as a link in the sandbox, as it is on the host; when the
// sandbox does not show where it leads, the link dangles inside and the
// files its author meant read-only are not there: the report says so
// (it said nothing). The control: with its target listed too, the link
// leads to the files, and no warning.
func TestReadOnlyLinkToNothingWarned(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target"), filepath.Join(dir, "link")
	os.Mkdir(target, 0o755)
	os.WriteFile(filepath.Join(target, "f"), []byte("here\n"), 0o644)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, withTarget := range []bool{false, true} {
		r := sh(t, t.TempDir(), func(p *policy.Policy) {
			p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, link)
			if withTarget {
				p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, target)
			}
		}, "cat "+link+"/f 2>/dev/null || echo missing")
		mustExit(t, r, 0)
		warned := slices.ContainsFunc(r.rep.Warnings, func(w string) bool {
			return strings.Contains(w, link+" is a symbolic link to "+target+", which the sandbox does not show")
		})
		if warned == withTarget || (r.stdout == "here\n") != withTarget {
			t.Errorf("target listed %v: output %q, warnings %q", withTarget, r.stdout, r.rep.Warnings)
		}
	}
}

// TestWorkspacePathsThroughLinks: a read-only path that is a link to the
// workspace, and a denied one that is a link above it, are refused as the
// same paths written out are (the link got past the check: --ro was
// ignored and the command wrote the workspace). The control: a link to a
// directory beside the workspace is shown read-only.
func TestWorkspacePathsThroughLinks(t *testing.T) {
	dir := t.TempDir()
	ws, beside := filepath.Join(dir, "ws"), filepath.Join(dir, "beside")
	os.Mkdir(ws, 0o755)
	os.Mkdir(beside, 0o755)
	os.Symlink(ws, filepath.Join(dir, "wslink"))
	os.Symlink(dir, filepath.Join(beside, "up"))
	os.Symlink(beside, filepath.Join(dir, "besidelink"))
	for name, set := range map[string]func(*policy.Policy){
		"read-only link to the workspace": func(p *policy.Policy) {
			p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, filepath.Join(dir, "wslink"))
		},
		"denied link above it": func(p *policy.Policy) { p.Filesystem.Deny = append(p.Filesystem.Deny, filepath.Join(beside, "up")) },
	} {
		r := run(t, ws, set, "/bin/sh", "-c", "echo x > written")
		if r.err == nil || !strings.Contains(r.err.Error(), "the workspace "+ws) {
			t.Errorf("%s: %v, want a refusal naming the workspace", name, r.err)
		}
		if _, err := os.Stat(filepath.Join(ws, "written")); err == nil {
			t.Errorf("%s: the command wrote the workspace", name)
		}
	}
	r := run(t, ws, func(p *policy.Policy) {
		p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, filepath.Join(dir, "besidelink"))
	}, "/bin/sh", "-c", "echo x > "+beside+"/f 2>/dev/null || echo read-only")
	if r.err != nil || r.stdout != "read-only\n" {
		t.Errorf("control: a read-only link beside the workspace: %v %q", r.err, r.stdout)
	}
}
