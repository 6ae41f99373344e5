// Package backendtest is the conformance suite every backend passes: the
// same probes of the filesystem view, identity, environment, network,
// limits, workspace and leftovers, run through backend.Backend.Run. Each
// escape probe has a positive control, the same probe where it must
// succeed, so that a probe which cannot see anything fails instead of
// passing.
//
// A backend's own tests call Run with the backend and what it supports.
// The suite builds its Specs itself (BaseSpec), as the sandbox package's
// compile step would for the default policy; it needs no policy.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/seccomp"
)

// Options say what the backend under test supports.
type Options struct {
	// Overlay: the backend mounts MountOverlay workspaces. Without it,
	// the suite checks that such a Spec is refused.
	Overlay bool
	// HostNetwork: the backend runs NetHost Specs (the positive control
	// of the network probe).
	HostNetwork bool
	// KilledUsage: a run the wall-clock limit ended reports the CPU time
	// its command used.
	KilledUsage bool
}

// BaseSpec is the Spec of the default policy for workspace ws, running
// args: read-only system directories, a tmpfs /tmp and home, the
// workspace writable, /proc, /dev, no network, the default seccomp
// profile, the sandbox user 1000.
func BaseSpec(ws string, args ...string) *backend.Spec {
	id := backend.Identity{UID: 1000, GID: 1000, HostUID: os.Getuid(), HostGID: os.Getgid()}
	root := os.Getuid() == 0
	if root {
		id.HostUID, id.HostGID = 2000000000, 2000000000
	}
	ms := []backend.Mount{{Kind: backend.MountTmpfs, Target: "/tmp", Options: "mode=1777"}}
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"} {
		if fi, err := os.Lstat(d); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			dest, _ := os.Readlink(d)
			ms = append(ms, backend.Mount{Kind: backend.MountSymlink, Source: dest, Target: d})
			continue
		}
		ms = append(ms, backend.Mount{Kind: backend.MountBind, Source: d, Target: d, ReadOnly: true, Optional: true})
	}
	ms = append(ms,
		backend.Mount{Kind: backend.MountTmpfs, Target: "/home/agent", Options: "mode=0700,uid=1000,gid=1000"},
		backend.Mount{Kind: backend.MountBind, Source: ws, Target: ws, IDMap: root},
		backend.Mount{Kind: backend.MountProc, Target: "/proc"},
		backend.Mount{Kind: backend.MountDev, Target: "/dev"},
		backend.Mount{Kind: backend.MountMask, Target: "/etc/shadow", Optional: true},
	)
	return &backend.Spec{
		RunID:    fmt.Sprintf("bt%d", time.Now().UnixNano()%1e9),
		Args:     args,
		Env:      []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/agent", "MOAT_BT=inside"},
		Dir:      ws,
		Hostname: "moat",
		Mounts:   ms,
		User:     id,
		Limits:   backend.Limits{Wall: time.Minute, OpenFiles: 1024, OutputBytes: 1 << 20},
		Network:  backend.Network{Mode: backend.NetNone},
		Seccomp:  []*seccomp.Profile{seccomp.Default()},
	}
}

// Workspace makes a workspace directory the sandbox user can write: as
// root, owned by that user (backends without id-mapped mounts write as
// the command's own uid).
func Workspace(t testing.TB) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		if err := os.Chown(ws, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// result is what one run gave.
type result struct {
	st             *backend.ExitStatus
	err            error
	stdout, stderr string
}

func run(t *testing.T, be backend.Backend, spec *backend.Spec) result {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := be.Run(ctx, spec, backend.Stdio{Stdout: &out, Stderr: &errb})
	return result{st, err, out.String(), errb.String()}
}

// sh runs a shell script in the base Spec and fails the test unless it
// exited 0.
func sh(t *testing.T, be backend.Backend, ws, script string) string {
	t.Helper()
	r := run(t, be, BaseSpec(ws, "/bin/sh", "-c", script))
	if r.err != nil || r.st.Cause != backend.CauseExit || r.st.ExitCode != 0 {
		t.Fatalf("sh -c %q: %+v %v\nstdout: %s\nstderr: %s", script, r.st, r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

// Run runs the whole suite against be.
func Run(t *testing.T, be backend.Backend, opts Options) {
	t.Run("FilesystemView", func(t *testing.T) { testFilesystem(t, be) })
	t.Run("SecretsInvisible", func(t *testing.T) { testSecrets(t, be) })
	t.Run("Proc", func(t *testing.T) { testProc(t, be) })
	t.Run("Identity", func(t *testing.T) { testIdentity(t, be) })
	t.Run("Environment", func(t *testing.T) { testEnvironment(t, be) })
	t.Run("NetworkNone", func(t *testing.T) { testNetwork(t, be, opts) })
	t.Run("ExitAndSignal", func(t *testing.T) { testExit(t, be) })
	t.Run("WallLimit", func(t *testing.T) { testWall(t, be, opts.KilledUsage) })
	t.Run("OutputLimit", func(t *testing.T) { testOutput(t, be) })
	t.Run("OneOutput", func(t *testing.T) { testOneOutput(t, be) })
	t.Run("Seccomp", func(t *testing.T) { testSeccomp(t, be) })
	t.Run("Overlay", func(t *testing.T) { testOverlay(t, be, opts) })
	t.Run("Leftovers", func(t *testing.T) { testLeftovers(t, be) })
}

// testFilesystem: the system is read-only, the workspace writable, and
// what the command writes there is on the host.
func testFilesystem(t *testing.T, be backend.Backend) {
	ws := Workspace(t)
	out := sh(t, be, ws, "touch /usr/moat-escape 2>/dev/null && echo usr-writable; touch /etc/moat-escape 2>/dev/null && echo etc-writable; echo hello > "+ws+"/made && echo ws-ok; touch /tmp/t && echo tmp-ok")
	if strings.Contains(out, "writable") {
		t.Errorf("system directories writable: %q", out)
	}
	if !strings.Contains(out, "ws-ok") || !strings.Contains(out, "tmp-ok") {
		t.Errorf("positive control: workspace or /tmp not writable: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "made")); err != nil || string(b) != "hello\n" {
		t.Errorf("the workspace write is not on the host: %q, %v", b, err)
	}
	for _, p := range []string{"/usr/moat-escape", "/etc/moat-escape"} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s reached the host", p)
		}
	}
}

// testSecrets: a host file outside every mount, and a masked one, cannot
// be read; the same content in the workspace can.
func testSecrets(t *testing.T, be backend.Backend) {
	ws := Workspace(t)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "token")
	os.WriteFile(secret, []byte("s3cret-outside"), 0o644)
	os.Chmod(secretDir, 0o755)
	os.WriteFile(filepath.Join(ws, "copy"), []byte("s3cret-inside"), 0o644)
	os.WriteFile(filepath.Join(ws, "masked"), []byte("s3cret-masked"), 0o644)
	spec := BaseSpec(ws, "/bin/sh", "-c", "cat "+secret+" "+ws+"/masked /etc/shadow; cat "+ws+"/copy")
	spec.Mounts = append(spec.Mounts, backend.Mount{Kind: backend.MountMask, Target: filepath.Join(ws, "masked")})
	r := run(t, be, spec)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if strings.Contains(r.stdout, "s3cret-outside") || strings.Contains(r.stdout, "s3cret-masked") || strings.Contains(r.stdout, "root:") {
		t.Errorf("a secret is readable: %q", r.stdout)
	}
	if !strings.Contains(r.stdout, "s3cret-inside") {
		t.Errorf("positive control: the workspace copy is not readable: %q %q", r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "masked")); err != nil {
		t.Errorf("the masked file is gone from the host: %v", err)
	}
}

// testProc: /proc is the sandbox's own: this test process is not in it,
// the command itself is.
func testProc(t *testing.T, be backend.Backend) {
	ws := Workspace(t)
	out := sh(t, be, ws, fmt.Sprintf("test -e /proc/%d/cmdline && echo host-visible; test -r /proc/self/status && echo self-ok; ls /proc | grep -c '^[0-9]'", os.Getpid()))
	if strings.Contains(out, "host-visible") {
		t.Errorf("a host process is visible in /proc: %q", out)
	}
	if !strings.Contains(out, "self-ok") {
		t.Errorf("positive control: /proc/self unreadable: %q", out)
	}
	var n int
	fmt.Sscan(strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &n)
	if n == 0 || n > 10 {
		t.Errorf("%d processes in /proc, want the run's few", n)
	}
}

// testIdentity: the command is the Spec's user, never root, with no
// capabilities.
func testIdentity(t *testing.T, be backend.Backend) {
	ws := Workspace(t)
	out := sh(t, be, ws, "id -u; id -g; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status; hostname; pwd")
	f := strings.Fields(out)
	want := []string{"1000", "1000", "CapPrm:", "0000000000000000", "CapEff:", "0000000000000000", "CapBnd:", "0000000000000000", "NoNewPrivs:", "1", "moat", ws}
	if strings.Join(f, " ") != strings.Join(want, " ") {
		t.Errorf("identity:\n%s\nwant %v", out, want)
	}
}

// testEnvironment: the command's environment is the Spec's, nothing of
// the caller's.
func testEnvironment(t *testing.T, be backend.Backend) {
	ws := Workspace(t)
	t.Setenv("MOAT_BT_HOST", "leaked")
	r := run(t, be, BaseSpec(ws, "/usr/bin/env"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if strings.Contains(r.stdout, "MOAT_BT_HOST") {
		t.Errorf("the caller's variable reached the command: %q", r.stdout)
	}
	if !strings.Contains(r.stdout, "MOAT_BT=inside") {
		t.Errorf("positive control: the Spec's variable is missing: %q", r.stdout)
	}
}

// testNetwork: with no network, a listener on the host's loopback is out
// of reach; with the host's network (where supported) the same probe
// reaches it.
func testNetwork(t *testing.T, be backend.Backend, opts Options) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("reached-host\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no /bin/bash here for the /dev/tcp probe")
	}
	probe := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && head -1 <&3", port)
	ws := Workspace(t)
	r := run(t, be, BaseSpec(ws, "/bin/bash", "-c", probe))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if strings.Contains(r.stdout, "reached-host") {
		t.Errorf("network none reached the host's loopback")
	}
	if !opts.HostNetwork {
		t.Log("no positive control: the backend has no host network")
		return
	}
	spec := BaseSpec(ws, "/bin/bash", "-c", probe)
	spec.Network.Mode = backend.NetHost
	r = run(t, be, spec)
	if r.err != nil || !strings.Contains(r.stdout, "reached-host") {
		t.Errorf("positive control: the host network did not reach the listener: %q %q %v", r.stdout, r.stderr, r.err)
	}
}

// testExit: exit codes and deaths by signal are the command's.
func testExit(t *testing.T, be backend.Backend) {
	ws := Workspace(t)
	r := run(t, be, BaseSpec(ws, "/bin/sh", "-c", "exit 3"))
	if r.err != nil || r.st.ExitCode != 3 || r.st.Cause != backend.CauseExit {
		t.Errorf("exit 3: %+v %v", r.st, r.err)
	}
	r = run(t, be, BaseSpec(ws, "/bin/sh", "-c", "kill -TERM $$"))
	if r.err != nil || r.st.Signal != 15 || r.st.Cause != backend.CauseSignal {
		t.Errorf("kill -TERM: %+v %v", r.st, r.err)
	}
	r = run(t, be, BaseSpec(ws, "/nonexistent/cmd"))
	if !errors.Is(r.err, backend.ErrNotFound) {
		t.Errorf("a missing command: %v, want ErrNotFound", r.err)
	}
}

// testWall: the wall-clock limit ends a run that outlives it, and only
// that one.
func testWall(t *testing.T, be backend.Backend, usage bool) {
	ws := Workspace(t)
	spec := BaseSpec(ws, "/bin/sleep", "30")
	spec.Limits.Wall = time.Second
	start := time.Now()
	r := run(t, be, spec)
	if r.err != nil || r.st.Cause != backend.CauseTimeout || time.Since(start) > 15*time.Second {
		t.Errorf("sleep 30 under a 1s wall: %+v %v after %v", r.st, r.err, time.Since(start))
	}
	if usage {
		// Killed, a busy command's CPU time is still reported, with no
		// cgroup to read it from (no limit here needs one). Another
		// process busy on the machine leaves it a good share.
		spec = BaseSpec(ws, "/bin/sh", "-c", "while :; do :; done")
		spec.Limits.Wall = time.Second
		if r := run(t, be, spec); r.err != nil || r.st.Cause != backend.CauseTimeout || r.st.CPU < 100*time.Millisecond {
			t.Errorf("a busy loop under a 1s wall: %+v %v, want its CPU time", r.st, r.err)
		}
	}
	spec = BaseSpec(ws, "/bin/sleep", "0.1")
	spec.Limits.Wall = 20 * time.Second
	if r := run(t, be, spec); r.err != nil || r.st.Cause != backend.CauseExit {
		t.Errorf("positive control: sleep 0.1 under a 20s wall: %+v %v", r.st, r.err)
	}
}

// testOutput: the output limit ends a run that writes past it.
func testOutput(t *testing.T, be backend.Backend) {
	ws := Workspace(t)
	spec := BaseSpec(ws, "/bin/sh", "-c", "yes moat")
	spec.Limits.OutputBytes = 64 << 10
	r := run(t, be, spec)
	if r.err != nil || r.st.Cause != backend.CauseOutput || len(r.stdout) > 64<<10 {
		t.Errorf("yes under a 64 KiB output limit: %+v %v, %d bytes", r.st, r.err, len(r.stdout))
	}
	spec = BaseSpec(ws, "/bin/echo", "small")
	spec.Limits.OutputBytes = 64 << 10
	if r := run(t, be, spec); r.err != nil || r.st.Cause != backend.CauseExit || r.stdout != "small\n" {
		t.Errorf("positive control: echo under the same limit: %+v %v %q", r.st, r.err, r.stdout)
	}
}

// interleaved is a script writing n lines to stdout and stderr in turn,
// and what it writes to each and to both in order.
func interleaved(n int) (script, both, out, errs string) {
	var b, o, e strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "out%d\nerr%d\n", i, i)
		fmt.Fprintf(&o, "out%d\n", i)
		fmt.Fprintf(&e, "err%d\n", i)
	}
	script = fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo out$i; echo err$i >&2; i=$((i+1)); done`, n)
	return script, b.String(), o.String(), e.String()
}

// testOneOutput: one writer for stdout and stderr gets their lines in the
// order written (one pipe, see backend.Stdio), with the output limit
// counting both. The control: two writers each get their own stream.
func testOneOutput(t *testing.T, be backend.Backend) {
	ws := Workspace(t)
	script, both, out, errs := interleaved(200)
	var w slowWriter
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := be.Run(ctx, BaseSpec(ws, "/bin/sh", "-c", script), backend.Stdio{Stdout: &w, Stderr: &w})
	if err != nil || st.Cause != backend.CauseExit || w.String() != both {
		t.Errorf("one writer for both: %+v %v, not the lines in order: %.200q", st, err, w.String())
	}
	spec := BaseSpec(ws, "/bin/sh", "-c", "yes moat >&2 & yes moat")
	spec.Limits.OutputBytes = 64 << 10
	var lw syncWriter
	st, err = be.Run(ctx, spec, backend.Stdio{Stdout: &lw, Stderr: &lw})
	if err != nil || st.Cause != backend.CauseOutput || len(lw.String()) > 64<<10 {
		t.Errorf("one writer under a 64 KiB output limit: %+v %v, %d bytes", st, err, len(lw.String()))
	}
	if r := run(t, be, BaseSpec(ws, "/bin/sh", "-c", script)); r.err != nil || r.stdout != out || r.stderr != errs {
		t.Errorf("control: two writers: %+v %v, stdout %.100q, stderr %.100q", r.st, r.err, r.stdout, r.stderr)
	}
}

// testSeccomp: the default profile refuses a new user namespace; with no
// profile the same probe gets past seccomp (and fails, if at all, for
// another reason than EPERM from the filter).
func testSeccomp(t *testing.T, be backend.Backend) {
	if _, err := os.Stat("/usr/bin/unshare"); err != nil {
		t.Skip("no unshare(1) here for the probe")
	}
	ws := Workspace(t)
	probe := "unshare -U true 2>&1 && echo made-userns"
	r := run(t, be, BaseSpec(ws, "/bin/sh", "-c", probe))
	if r.err != nil || strings.Contains(r.stdout, "made-userns") {
		t.Errorf("the default profile let a user namespace be made: %q %v", r.stdout, r.err)
	}
	spec := BaseSpec(ws, "/bin/sh", "-c", probe)
	spec.Seccomp = nil
	if r := run(t, be, spec); r.err != nil || !strings.Contains(r.stdout, "made-userns") {
		t.Errorf("positive control: unconfined, unshare -U failed: %q %v", r.stdout, r.err)
	}
}

// testOverlay: an overlay workspace keeps the command's writes in the
// upper layer, or the backend refuses it.
func testOverlay(t *testing.T, be backend.Backend, opts Options) {
	ws := Workspace(t)
	layers := t.TempDir()
	for _, d := range []string{"upper", "work"} {
		os.Mkdir(filepath.Join(layers, d), 0o755)
	}
	mountsBefore := countLines("/proc/self/mountinfo")
	spec := BaseSpec(ws, "/bin/sh", "-c", "echo changed > "+ws+"/f")
	for i, m := range spec.Mounts {
		if m.Target == ws {
			spec.Mounts[i] = backend.Mount{Kind: backend.MountOverlay, Source: ws, Target: ws, Layers: layers, IDMap: m.IDMap}
		}
	}
	r := run(t, be, spec)
	if !opts.Overlay {
		if r.err == nil {
			t.Errorf("an overlay workspace ran on a backend without overlays: %+v", r.st)
		}
		return
	}
	if r.err != nil || r.st.ExitCode != 0 {
		t.Fatalf("overlay run: %+v %v %s", r.st, r.err, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "f")); err == nil {
		t.Error("an overlay write reached the workspace itself")
	}
	if b, err := os.ReadFile(filepath.Join(layers, "upper", "f")); err != nil || string(b) != "changed\n" {
		t.Errorf("positive control: the write is not in the upper layer: %q %v", b, err)
	}
	if n := countLines("/proc/self/mountinfo"); n != mountsBefore {
		t.Errorf("%d mounts before the overlay run, %d after", mountsBefore, n)
	}
}

// testLeftovers: after a run whose command left a process behind, no
// process of it is alive, no mount of it is left in this namespace, and
// nothing is left in the temporary directory.
func testLeftovers(t *testing.T, be backend.Backend) {
	ws := Workspace(t)
	tmp := t.TempDir()
	os.Chmod(tmp, 0o755)
	t.Setenv("TMPDIR", tmp)
	mountsBefore := countLines("/proc/self/mountinfo")
	marker := "4242.4242"
	spec := BaseSpec(ws, "/bin/sh", "-c", "(sleep "+marker+" &) ; sleep 0.2; echo started")
	if r := run(t, be, spec); r.err != nil || r.st.ExitCode != 0 {
		t.Fatalf("run: %+v %v %s", r.st, r.err, r.stderr)
	}
	// The command's processes, and the backend's own helpers, which
	// name the run (a user-space kernel's processes are not the host's).
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && (bytes.Contains(b, []byte(marker)) || bytes.Contains(b, []byte(spec.RunID))) {
			t.Errorf("a process of the run outlived it: %s %q", p, b)
		}
	}
	if n := countLines("/proc/self/mountinfo"); n != mountsBefore {
		t.Errorf("%d mounts before the run, %d after", mountsBefore, n)
	}
	left, _ := os.ReadDir(tmp)
	for _, e := range left {
		t.Errorf("left in TMPDIR: %s", e.Name())
	}
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}
