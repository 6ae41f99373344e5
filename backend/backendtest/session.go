package backendtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
)

// SessionOptions say what the backend under test supports in sessions.
type SessionOptions struct {
	// HostNetwork: the backend creates NetHost sandboxes (the positive
	// control of the network probe).
	HostNetwork bool
}

// RunSession runs the session suite against be: the probes of Run, made
// through Lifecycle.Create and Instance.Exec, and what only a sandbox
// that lives across commands has (state kept between commands, an init
// the commands cannot reach, signals, a terminal, the end of it all).
func RunSession(t *testing.T, be backend.Lifecycle, opts SessionOptions) {
	t.Run("FilesystemView", func(t *testing.T) { testSessionFilesystem(t, be) })
	t.Run("Identity", func(t *testing.T) { testSessionIdentity(t, be) })
	t.Run("Environment", func(t *testing.T) { testSessionEnvironment(t, be) })
	t.Run("NetworkNone", func(t *testing.T) { testSessionNetwork(t, be, opts) })
	t.Run("NetworkProxy", func(t *testing.T) { testSessionProxy(t, be) })
	t.Run("Limits", func(t *testing.T) { testSessionLimits(t, be) })
	t.Run("Seccomp", func(t *testing.T) { testSessionSeccomp(t, be) })
	t.Run("InitUnreachable", func(t *testing.T) { testSessionInit(t, be) })
	t.Run("Signal", func(t *testing.T) { testSessionSignal(t, be) })
	t.Run("OneOutput", func(t *testing.T) { testSessionOneOutput(t, be) })
	t.Run("Tty", func(t *testing.T) { testSessionTty(t, be) })
	t.Run("Stats", func(t *testing.T) { testSessionStats(t, be) })
	t.Run("DestroyUnderCommand", func(t *testing.T) { testSessionDestroyUnderCommand(t, be) })
	t.Run("Leftovers", func(t *testing.T) { testSessionLeftovers(t, be) })
}

// create makes a sandbox of spec, destroyed at the end of the test.
func create(t *testing.T, be backend.Lifecycle, spec *backend.Spec, stdio backend.Stdio) backend.Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, err := be.Create(ctx, spec, stdio)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { in.Destroy(context.Background()) })
	return in
}

// execIn runs args in in with the Spec's environment and directory and
// returns what it wrote and how it ended.
func execIn(t *testing.T, in backend.Instance, spec *backend.Spec, p backend.ProcessSpec, args ...string) result {
	t.Helper()
	p.Args = args
	if p.Env == nil {
		p.Env = spec.Env
	}
	if p.Dir == "" {
		p.Dir = spec.Dir
	}
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	proc, err := in.Exec(ctx, &p, backend.Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		return result{err: err}
	}
	st, err := proc.Wait()
	return result{st, err, out.String(), errb.String()}
}

// shIn runs a shell script in in and fails the test unless it exited 0.
func shIn(t *testing.T, in backend.Instance, spec *backend.Spec, script string) string {
	t.Helper()
	r := execIn(t, in, spec, backend.ProcessSpec{}, "/bin/sh", "-c", script)
	if r.err != nil || r.st.Cause != backend.CauseExit || r.st.ExitCode != 0 {
		t.Fatalf("sh -c %q: %+v %v\nstdout: %s\nstderr: %s", script, r.st, r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

// testSessionFilesystem: the system is read-only, the workspace writable
// and on the host, and what one command leaves in /tmp the next reads.
func testSessionFilesystem(t *testing.T, be backend.Lifecycle) {
	ws := Workspace(t)
	spec := BaseSpec(ws)
	in := create(t, be, spec, backend.Stdio{})
	out := shIn(t, in, spec, "touch /usr/moat-escape 2>/dev/null && echo usr-writable; touch /etc/moat-escape 2>/dev/null && echo etc-writable; echo hello > "+ws+"/made && echo ws-ok; echo kept > /tmp/state && echo tmp-ok")
	if strings.Contains(out, "writable") {
		t.Errorf("system directories writable: %q", out)
	}
	if !strings.Contains(out, "ws-ok") || !strings.Contains(out, "tmp-ok") {
		t.Errorf("positive control: workspace or /tmp not writable: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "made")); err != nil || string(b) != "hello\n" {
		t.Errorf("the workspace write is not on the host: %q, %v", b, err)
	}
	if out := shIn(t, in, spec, "cat /tmp/state"); out != "kept\n" {
		t.Errorf("the next command read %q from /tmp, want what the first wrote", out)
	}
	for _, p := range []string{"/usr/moat-escape", "/etc/moat-escape"} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s reached the host", p)
		}
	}
}

// testSessionIdentity: every command is the Spec's user, never root,
// with no capabilities and no_new_privs, in its own session.
func testSessionIdentity(t *testing.T, be backend.Lifecycle) {
	ws := Workspace(t)
	spec := BaseSpec(ws)
	in := create(t, be, spec, backend.Stdio{})
	for i := 0; i < 2; i++ {
		out := shIn(t, in, spec, "id -u; id -g; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status; hostname; pwd")
		f := strings.Fields(out)
		want := []string{"1000", "1000", "CapPrm:", "0000000000000000", "CapEff:", "0000000000000000", "CapBnd:", "0000000000000000", "NoNewPrivs:", "1", "moat", ws}
		if strings.Join(f, " ") != strings.Join(want, " ") {
			t.Errorf("identity of command %d:\n%s\nwant %v", i+1, out, want)
		}
	}
	// Its own session and process group: the shell is their leader.
	out := shIn(t, in, spec, "ps -o pid= -o sid= -o pgid= -p $$ 2>/dev/null || awk '{print $1, $6, $5}' /proc/$$/stat")
	if f := strings.Fields(out); len(f) != 3 || f[0] != f[1] || f[0] != f[2] {
		t.Errorf("pid, session and process group of a command: %q, want all three equal", out)
	}
}

// testSessionEnvironment: a command's environment is its ProcessSpec's,
// nothing of the caller's nor of another command's.
func testSessionEnvironment(t *testing.T, be backend.Lifecycle) {
	ws := Workspace(t)
	t.Setenv("MOAT_BT_HOST", "leaked")
	spec := BaseSpec(ws)
	in := create(t, be, spec, backend.Stdio{})
	r := execIn(t, in, spec, backend.ProcessSpec{Env: append(append([]string{}, spec.Env...), "MOAT_BT_ONE=first")}, "/usr/bin/env")
	if r.err != nil || !strings.Contains(r.stdout, "MOAT_BT_ONE=first") || !strings.Contains(r.stdout, "MOAT_BT=inside") {
		t.Errorf("positive control: the command's variables are missing: %q %v", r.stdout, r.err)
	}
	r = execIn(t, in, spec, backend.ProcessSpec{}, "/usr/bin/env")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if strings.Contains(r.stdout, "MOAT_BT_HOST") || strings.Contains(r.stdout, "MOAT_BT_ONE") {
		t.Errorf("the caller's or another command's variable reached the command: %q", r.stdout)
	}
}

// loopbackServer listens on the host's loopback and answers every
// connection with line; it returns the port.
func loopbackServer(t *testing.T, line string) int {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(line + "\n"))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// tcpProbe is a bash script that prints the first line a TCP server on
// 127.0.0.1:port sends.
func tcpProbe(t *testing.T, port int) []string {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no /bin/bash here for the /dev/tcp probe")
	}
	return []string{"/bin/bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && head -1 <&3", port)}
}

// testSessionNetwork: with no network, a listener on the host's loopback
// is out of reach of every command; with the host's network (where
// supported) the same probe reaches it.
func testSessionNetwork(t *testing.T, be backend.Lifecycle, opts SessionOptions) {
	probe := tcpProbe(t, loopbackServer(t, "reached-host"))
	ws := Workspace(t)
	spec := BaseSpec(ws)
	in := create(t, be, spec, backend.Stdio{})
	if r := execIn(t, in, spec, backend.ProcessSpec{}, probe...); r.err != nil || strings.Contains(r.stdout, "reached-host") {
		t.Errorf("network none reached the host's loopback: %q %v", r.stdout, r.err)
	}
	if !opts.HostNetwork {
		t.Log("no positive control: the backend has no host network")
		return
	}
	spec = BaseSpec(ws)
	spec.Network.Mode = backend.NetHost
	in = create(t, be, spec, backend.Stdio{})
	if r := execIn(t, in, spec, backend.ProcessSpec{}, probe...); r.err != nil || !strings.Contains(r.stdout, "reached-host") {
		t.Errorf("positive control: the host network did not reach the listener: %q %q %v", r.stdout, r.stderr, r.err)
	}
}

// testSessionProxy: in network mode proxy, 127.0.0.1:ProxyPort inside
// reaches the host's ServeProxy (the positive control), from several
// commands, while the host's loopback stays out of reach.
func testSessionProxy(t *testing.T, be backend.Lifecycle) {
	hostProbe := tcpProbe(t, loopbackServer(t, "reached-host"))
	ws := Workspace(t)
	spec := BaseSpec(ws)
	spec.Network = backend.Network{Mode: backend.NetProxy, ProxyPort: 3128}
	serve := func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("reached-proxy\n"))
			c.Close()
		}
	}
	in := create(t, be, spec, backend.Stdio{ServeProxy: serve})
	for i := 0; i < 2; i++ {
		if r := execIn(t, in, spec, backend.ProcessSpec{}, tcpProbe(t, 3128)...); r.err != nil || !strings.Contains(r.stdout, "reached-proxy") {
			t.Errorf("positive control: command %d did not reach the proxy: %q %q %v", i+1, r.stdout, r.stderr, r.err)
		}
	}
	if r := execIn(t, in, spec, backend.ProcessSpec{}, hostProbe...); r.err != nil || strings.Contains(r.stdout, "reached-host") {
		t.Errorf("network mode proxy reached the host's loopback: %q %v", r.stdout, r.err)
	}
}

// testSessionLimits: the wall and output limits end the command that
// passes them, and only it; the Spec's rlimits hold in every command.
func testSessionLimits(t *testing.T, be backend.Lifecycle) {
	ws := Workspace(t)
	spec := BaseSpec(ws)
	in := create(t, be, spec, backend.Stdio{})
	start := time.Now()
	r := execIn(t, in, spec, backend.ProcessSpec{Wall: time.Second}, "/bin/sleep", "30")
	if r.err != nil || r.st.Cause != backend.CauseTimeout || time.Since(start) > 15*time.Second {
		t.Errorf("sleep 30 under a 1s wall: %+v %v after %v", r.st, r.err, time.Since(start))
	}
	if r := execIn(t, in, spec, backend.ProcessSpec{Wall: 20 * time.Second}, "/bin/sleep", "0.1"); r.err != nil || r.st.Cause != backend.CauseExit {
		t.Errorf("positive control: sleep 0.1 under a 20s wall: %+v %v", r.st, r.err)
	}
	r = execIn(t, in, spec, backend.ProcessSpec{Output: 64 << 10}, "/bin/sh", "-c", "yes moat")
	if r.err != nil || r.st.Cause != backend.CauseOutput || len(r.stdout) > 64<<10 {
		t.Errorf("yes under a 64 KiB output limit: %+v %v, %d bytes", r.st, r.err, len(r.stdout))
	}
	if r := execIn(t, in, spec, backend.ProcessSpec{Output: 64 << 10}, "/bin/echo", "small"); r.err != nil || r.st.Cause != backend.CauseExit || r.stdout != "small\n" {
		t.Errorf("positive control: echo under the same limit: %+v %v %q", r.st, r.err, r.stdout)
	}
	if out := shIn(t, in, spec, "ulimit -n"); strings.TrimSpace(out) != fmt.Sprint(spec.Limits.OpenFiles) {
		t.Errorf("open files limit in a command: %q, want %d", out, spec.Limits.OpenFiles)
	}
	r = execIn(t, in, spec, backend.ProcessSpec{}, "/bin/sh", "-c", "exit 3")
	if r.err != nil || r.st.ExitCode != 3 || r.st.Cause != backend.CauseExit {
		t.Errorf("exit 3: %+v %v", r.st, r.err)
	}
	if r := execIn(t, in, spec, backend.ProcessSpec{}, "/nonexistent/cmd"); !errors.Is(r.err, backend.ErrNotFound) {
		t.Errorf("a missing command: %v, want ErrNotFound", r.err)
	}
}

// testSessionSeccomp: the default profile refuses a new user namespace
// in every command; in a sandbox without a profile the same probe gets
// past seccomp.
func testSessionSeccomp(t *testing.T, be backend.Lifecycle) {
	if _, err := os.Stat("/usr/bin/unshare"); err != nil {
		t.Skip("no unshare(1) here for the probe")
	}
	ws := Workspace(t)
	probe := "unshare -U true 2>&1 && echo made-userns"
	spec := BaseSpec(ws)
	in := create(t, be, spec, backend.Stdio{})
	if r := execIn(t, in, spec, backend.ProcessSpec{}, "/bin/sh", "-c", probe); r.err != nil || strings.Contains(r.stdout, "made-userns") {
		t.Errorf("the default profile let a user namespace be made: %q %v", r.stdout, r.err)
	}
	spec = BaseSpec(ws)
	spec.Seccomp = nil
	in = create(t, be, spec, backend.Stdio{})
	if r := execIn(t, in, spec, backend.ProcessSpec{}, "/bin/sh", "-c", probe); r.err != nil || !strings.Contains(r.stdout, "made-userns") {
		t.Errorf("positive control: unconfined, unshare -U failed: %q %v", r.stdout, r.err)
	}
}

// testSessionInit: a command can neither kill nor read what holds the
// sandbox (pid 1, and every other process it sees that is not its own;
// a backend may keep its init out of the command's sight), while the
// same probes reach a process of its own; the sandbox lives on.
func testSessionInit(t *testing.T, be backend.Lifecycle) {
	ws := Workspace(t)
	spec := BaseSpec(ws)
	in := create(t, be, spec, backend.Stdio{})
	// kill(2) reports success for a signal PID 1 drops: whether the
	// target is still there (ESRCH, not EPERM) says if it was killed.
	probe := `t=$1
kill -0 $t 2>&1 | grep -qi 'no such process' && exit 0
cat /proc/$t/environ >/dev/null 2>&1 && echo ENVIRON-$t
kill -9 $t 2>/dev/null
sleep 0.2
kill -0 $t 2>&1 | grep -qi 'no such process' && echo KILLED-$t
true`
	r := execIn(t, in, spec, backend.ProcessSpec{}, "/bin/sh", "-c", `for d in /proc/[0-9]*; do
	p=${d#/proc/}
	[ "$p" = $$ ] || /bin/sh -c "$1" sh "$p"
done
/bin/sh -c "$1" sh 1`, "sh", probe)
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, w := range []string{"KILLED", "ENVIRON"} {
		if strings.Contains(r.stdout, w) {
			t.Errorf("a command reached a process not its own (%s):\n%s", w, r.stdout)
		}
	}
	select {
	case <-in.Done():
		t.Fatal("the sandbox ended")
	case <-time.After(200 * time.Millisecond):
	}
	if out := shIn(t, in, spec, "echo alive"); out != "alive\n" {
		t.Errorf("after the probes: %q", out)
	}
	// Control: the same probes reach a process of the command's own.
	r = execIn(t, in, spec, backend.ProcessSpec{}, "/bin/sh", "-c", `sleep 60 & pid=$!; /bin/sh -c "$1" sh $pid`, "sh", probe)
	for _, w := range []string{"ENVIRON", "KILLED"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("control: the probe did not reach the command's own child (%s): %q %q %v", w, r.stdout, r.stderr, r.err)
		}
	}
}

// testSessionSignal: Process.Signal reaches the command's process group;
// once it has exited, Signal says so.
func testSessionSignal(t *testing.T, be backend.Lifecycle) {
	ws := Workspace(t)
	spec := BaseSpec(ws)
	in := create(t, be, spec, backend.Stdio{})
	rd, wr := io.Pipe()
	proc, err := in.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"/bin/sh", "-c", "echo up; sleep 30 & wait"}, Env: spec.Env, Dir: ws}, backend.Stdio{Stdout: wr})
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(rd).ReadString('\n')
	go io.Copy(io.Discard, rd)
	if line != "up\n" {
		t.Fatalf("read %q", line)
	}
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st, err := proc.Wait()
	wr.Close()
	if err != nil || st.Cause != backend.CauseSignal || st.Signal != int(syscall.SIGTERM) {
		t.Errorf("after SIGTERM: %+v %v", st, err)
	}
	if err := proc.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after the exit: %v, want os.ErrProcessDone", err)
	}
}

// testSessionTty: a command asked a terminal gets one of the size asked,
// as its stdin and stdout; a command not asked one has none.
func testSessionTty(t *testing.T, be backend.Lifecycle) {
	ws := Workspace(t)
	spec := BaseSpec(ws)
	in := create(t, be, spec, backend.Stdio{})
	r := execIn(t, in, spec, backend.ProcessSpec{Tty: true, Rows: 33, Cols: 101}, "/bin/sh", "-c", "test -t 0 && test -t 1 && echo tty; stty size")
	if r.err != nil || !strings.Contains(r.stdout, "tty") || !strings.Contains(r.stdout, "33 101") {
		t.Errorf("with a terminal: %q %v", r.stdout, r.err)
	}
	r = execIn(t, in, spec, backend.ProcessSpec{}, "/bin/sh", "-c", "test -t 0 || test -t 1 || echo no-tty")
	if r.err != nil || !strings.Contains(r.stdout, "no-tty") {
		t.Errorf("without a terminal: %q %v", r.stdout, r.err)
	}
	// Resize: the command reads the new size once told to go on.
	inR, inW := io.Pipe()
	var out syncWriter
	proc, err := in.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"/bin/sh", "-c", "echo up; read x; stty size"}, Env: spec.Env, Dir: ws, Tty: true, Rows: 10, Cols: 20}, backend.Stdio{Stdin: inR, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "up") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if err := proc.Resize(40, 120); err != nil {
		t.Fatal(err)
	}
	inW.Write([]byte("go\n"))
	st, err := proc.Wait()
	inW.Close()
	if err != nil || st.ExitCode != 0 || !strings.Contains(out.String(), "40 120") {
		t.Errorf("after Resize(40, 120): %q %+v %v", out.String(), st, err)
	}
}

// testSessionOneOutput: as testOneOutput, for a command of a session.
func testSessionOneOutput(t *testing.T, be backend.Lifecycle) {
	ws := Workspace(t)
	spec := BaseSpec(ws)
	in := create(t, be, spec, backend.Stdio{})
	script, both, out, errs := interleaved(200)
	var w slowWriter
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	proc, err := in.Exec(ctx, &backend.ProcessSpec{Args: []string{"/bin/sh", "-c", script}, Env: spec.Env, Dir: spec.Dir}, backend.Stdio{Stdout: &w, Stderr: &w})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := proc.Wait(); err != nil || st.Cause != backend.CauseExit || w.String() != both {
		t.Errorf("one writer for both: %+v %v, not the lines in order: %.200q", st, err, w.String())
	}
	if r := execIn(t, in, spec, backend.ProcessSpec{}, "/bin/sh", "-c", script); r.err != nil || r.stdout != out || r.stderr != errs {
		t.Errorf("control: two writers: %+v %v, stdout %.100q, stderr %.100q", r.st, r.err, r.stdout, r.stderr)
	}
}

// slowWriter is a syncWriter whose every Write takes a while, as a
// terminal's or a network client's may: lines the command writes
// meanwhile gather in the pipes, so that two pipes' copies would put
// them out of order where one pipe keeps it.
type slowWriter struct{ syncWriter }

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(200 * time.Microsecond)
	return w.syncWriter.Write(p)
}

// syncWriter is a buffer a copy writes while the test reads it.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// testSessionLeftovers: after Destroy, with a command left running in
// the background, no process of the sandbox is alive, no mount of it is
// left in this namespace, nothing is left in the temporary directory, and
// Done is closed; a second Destroy is harmless.
func testSessionLeftovers(t *testing.T, be backend.Lifecycle) {
	ws := Workspace(t)
	tmp := t.TempDir()
	os.Chmod(tmp, 0o755)
	t.Setenv("TMPDIR", tmp)
	mountsBefore := countLines("/proc/self/mountinfo")
	spec := BaseSpec(ws)
	in, err := be.Create(context.Background(), spec, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	marker := "4243.4243"
	shIn(t, in, spec, "(sleep "+marker+" &); sleep 0.2")
	if err := in.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-in.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after Destroy")
	}
	if err := in.Destroy(context.Background()); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && (bytes.Contains(b, []byte(marker)) || bytes.Contains(b, []byte(spec.RunID))) {
			t.Errorf("a process of the sandbox outlived it: %s %q", p, b)
		}
	}
	if n := countLines("/proc/self/mountinfo"); n != mountsBefore {
		t.Errorf("%d mounts before the sandbox, %d after", mountsBefore, n)
	}
	left, _ := os.ReadDir(tmp)
	for _, e := range left {
		t.Errorf("left in TMPDIR: %s", e.Name())
	}
	if _, err := in.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"/bin/true"}, Env: spec.Env, Dir: ws}, backend.Stdio{}); err == nil {
		t.Error("Exec after Destroy started a process")
	}
}

// testSessionStats: Stats counts the sandbox's work: CPU time grows with
// a busy command, and the sandbox has tasks and memory.
func testSessionStats(t *testing.T, be backend.Lifecycle) {
	ws := Workspace(t)
	spec := BaseSpec(ws)
	in := create(t, be, spec, backend.Stdio{})
	before := in.Stats()
	shIn(t, in, spec, "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done")
	after := in.Stats()
	if after.CPU <= before.CPU || after.CPU > time.Hour {
		t.Errorf("CPU time %v before a busy command, %v after", before.CPU, after.CPU)
	}
	if after.Pids <= 0 || after.MemoryBytes <= 0 {
		t.Errorf("stats of a live sandbox: %+v", after)
	}
	in.Destroy(context.Background())
	if st := in.Stats(); st.Pids != 0 {
		t.Errorf("stats after Destroy: %+v", st)
	}
}

// testSessionDestroyUnderCommand: a command still running when the
// sandbox is destroyed ends with cause killed, and Wait returns.
func testSessionDestroyUnderCommand(t *testing.T, be backend.Lifecycle) {
	ws := Workspace(t)
	spec := BaseSpec(ws)
	in := create(t, be, spec, backend.Stdio{})
	proc, err := in.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"/bin/sleep", "60"}, Env: spec.Env, Dir: ws}, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	in.Destroy(context.Background())
	st, err := proc.Wait()
	if err != nil || st.Cause != backend.CauseKilled {
		t.Errorf("a command under Destroy: %+v %v, want cause killed", st, err)
	}
}
