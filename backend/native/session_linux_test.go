//go:build linux

package native_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/internal/proctest"
	"github.com/moatbox/moat/internal/pty"
)

// session creates a sandbox for the default policy over a fresh
// workspace, destroyed at the end of the test.
func session(t testing.TB) (backend.Instance, *backend.Spec) {
	t.Helper()
	s := spec(t, t.TempDir(), "/bin/true")
	inst, err := (&native.Backend{}).Create(context.Background(), s, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Destroy(context.Background()) })
	return inst, s
}

// execOut runs argv in inst to completion and returns its output.
func execOut(t testing.TB, inst backend.Instance, s *backend.Spec, p backend.ProcessSpec, args ...string) (string, *backend.ExitStatus) {
	t.Helper()
	p.Args, p.Env, p.Dir = args, s.Env, s.Dir
	var out bytes.Buffer
	proc, err := inst.Exec(context.Background(), &p, backend.Stdio{Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("exec %q: %v", args, err)
	}
	st, err := proc.Wait()
	if err != nil {
		t.Fatalf("wait %q: %v", args, err)
	}
	return out.String(), st
}

// sessionInit returns the host pid of the one session init this test
// process has, and the directories of its cgroups.
func sessionInit(t *testing.T) (int, []string) {
	t.Helper()
	var pid int
	for _, p := range proctest.Children(os.Getpid()) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if strings.HasPrefix(string(b), "moat-sandbox-init") {
			if pid != 0 {
				t.Fatal("more than one sandbox init")
			}
			pid = p
		}
	}
	if pid == 0 {
		t.Fatal("no sandbox init found")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	own, _ := os.ReadFile("/proc/self/cgroup")
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-id:controllers:path; only the sandbox's own.
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || strings.Contains(string(own), line) || !strings.Contains(parts[2], "moat-") {
			continue
		}
		root := "/sys/fs/cgroup"
		if parts[1] != "" {
			root += "/" + strings.TrimPrefix(strings.Split(parts[1], ",")[0], "name=")
		} else if _, err := os.Stat("/sys/fs/cgroup/unified"); err == nil {
			root += "/unified"
		}
		dirs = append(dirs, filepath.Join(root, parts[2]))
	}
	return pid, dirs
}

func checkGone(t *testing.T, what string, marker string, cgroups []string) {
	t.Helper()
	if left := proctest.Gone(func() []int { return proctest.Find(marker) }, 5*time.Second); len(left) > 0 {
		t.Errorf("%s: processes left: %v", what, left)
	}
	for _, d := range cgroups {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s: cgroup %s left", what, d)
		}
	}
}

// TestSessionKeepsState: what one command leaves (a file in /tmp, a
// background process) is there for the next; a background process
// lives on through other commands until signalled, and Destroy leaves
// nothing behind.
func TestSessionKeepsState(t *testing.T) {
	inst, s := session(t)
	_, cgroups := sessionInit(t)
	if out, st := execOut(t, inst, s, backend.ProcessSpec{}, "/bin/sh", "-c", "echo kept > /tmp/state"); st.ExitCode != 0 {
		t.Fatalf("write: exit %d: %s", st.ExitCode, out)
	}
	if out, _ := execOut(t, inst, s, backend.ProcessSpec{}, "cat", "/tmp/state"); out != "kept\n" {
		t.Fatalf("the next command read %q, want the file the first wrote", out)
	}

	marker := fmt.Sprintf("%d.%d", 3000+os.Getpid()%1000, time.Now().UnixNano()%1000)
	bg, err := inst.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"sleep", marker}, Env: s.Env, Dir: s.Dir}, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := execOut(t, inst, s, backend.ProcessSpec{}, "/bin/sh", "-c", "ps -eo args 2>/dev/null || cat /proc/[0-9]*/cmdline | tr '\\0' ' '"); !strings.Contains(out, "sleep "+marker) {
		t.Errorf("the background process is not alive during the next command:\n%s", out)
	}
	if len(proctest.Appear(func() []int { return proctest.Find("sleep " + marker) }, 5*time.Second)) != 1 {
		t.Errorf("the background process is not alive on the host")
	}
	// Init and the sleep, at least, and what they use.
	if st := inst.Stats(); st.Pids < 2 || st.MemoryBytes <= 0 {
		t.Errorf("Stats %+v: want 2 tasks or more, and memory", st)
	}
	if err := bg.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st, err := bg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if st.Signal != int(syscall.SIGTERM) || st.Cause != backend.CauseSignal {
		t.Errorf("signalled process: signal %d cause %s, want SIGTERM, signal", st.Signal, st.Cause)
	}
	if err := bg.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("signal after exit: %v, want os.ErrProcessDone", err)
	}

	// A process a command leaves in the background lives on after it,
	// until Destroy.
	if out, st := execOut(t, inst, s, backend.ProcessSpec{}, "/bin/sh", "-c", "sleep "+marker+"1 >/dev/null 2>&1 & echo started"); st.ExitCode != 0 || out != "started\n" {
		t.Fatalf("exit %d: %q", st.ExitCode, out)
	}
	if len(proctest.Appear(func() []int { return proctest.Find("sleep " + marker + "1") }, 5*time.Second)) != 1 {
		t.Errorf("the process left in the background did not live on")
	}
	if err := inst.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inst.Done():
	default:
		t.Error("Done not closed after Destroy")
	}
	checkGone(t, "after Destroy", marker, cgroups)
	if _, err := inst.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"true"}}, backend.Stdio{}); !errors.Is(err, native.ErrEnded) {
		t.Errorf("exec after Destroy: %v, want ErrEnded", err)
	}
	if err := inst.Destroy(context.Background()); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
}

// statusField reads one field of a /proc/PID/status text.
func statusField(status, field string) string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestSessionExecRestrictions: every process of a session, the first and
// the later ones, one started while another runs among them, runs as the
// sandbox user with no capabilities, no_new_privs and the seccomp filter.
func TestSessionExecRestrictions(t *testing.T) {
	inst, s := session(t)
	// Positive control: the probe reads a process without a filter
	// (this test's own children) as such.
	host, err := exec.Command("cat", "/proc/self/status").Output()
	if err != nil {
		t.Fatal(err)
	}
	if statusField(string(host), "Seccomp") != "0" || statusField(string(host), "NoNewPrivs") != "0" {
		t.Logf("this test runs under a seccomp filter or no_new_privs already: the control below shows only that the probe reads the fields:\n%s", host)
	}
	for _, f := range []string{"Uid", "CapEff", "NoNewPrivs", "Seccomp"} {
		if statusField(string(host), f) == "" {
			t.Fatalf("the probe finds no %s in /proc/self/status:\n%s", f, host)
		}
	}
	bg, err := inst.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"sleep", "60"}, Env: s.Env, Dir: s.Dir}, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	defer bg.Signal(syscall.SIGKILL)
	for i := range 3 {
		out, _ := execOut(t, inst, s, backend.ProcessSpec{}, "cat", "/proc/self/status")
		uid := strings.Fields(statusField(out, "Uid"))
		if len(uid) == 0 || uid[0] != fmt.Sprint(s.User.UID) {
			t.Errorf("exec %d: Uid %v, want %d", i, uid, s.User.UID)
		}
		for field, want := range map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"} {
			if got := statusField(out, field); got != want {
				t.Errorf("exec %d: %s %q, want %q", i, field, got, want)
			}
		}
	}
	// Landlock: a path bound read-write but left out of the Landlock
	// rules refuses writes in every process; granted, the same write
	// works (the control).
	if (&native.Backend{}).Capabilities().LandlockABI == 0 {
		t.Log("no Landlock on this kernel: its part is skipped")
		return
	}
	for _, grant := range []bool{false, true} {
		extra := t.TempDir()
		ls := spec(t, t.TempDir(), "/bin/true")
		ls.Mounts = append(ls.Mounts, backend.Mount{Kind: backend.MountBind, Source: extra, Target: "/opt/moat-widened", IDMap: os.Geteuid() == 0, NoLandlockGrant: !grant})
		li, err := (&native.Backend{}).Create(context.Background(), ls, backend.Stdio{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			out, _ := execOut(t, li, ls, backend.ProcessSpec{}, "/bin/sh", "-c", fmt.Sprintf("echo x > /opt/moat-widened/f%d && echo WROTE", i))
			if wrote := strings.Contains(out, "WROTE"); wrote != grant {
				t.Errorf("landlock grant %v, exec %d: wrote %v: %s", grant, i, wrote, out)
			}
		}
		li.Destroy(context.Background())
	}
}

// TestSessionInitUnreachable: no command of a session can kill, trace
// or read its init; the same probes work on the command's own child.
func TestSessionInitUnreachable(t *testing.T) {
	inst, s := session(t)
	probe := `
target=$1
cat /proc/$target/environ >/dev/null 2>&1 && echo ENVIRON-$target
python3 - $target <<'EOF'
import ctypes, sys
pid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
    print("TRACED-%d" % pid)
try:
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.read(1)
    print("MEM-%d" % pid)
except OSError as e:
    if e.errno == 5:  # EIO: opened, nothing mapped at 0
        print("MEM-%d" % pid)
EOF
# kill(2) reports success for a signal PID 1 drops: whether it still
# lives says if it was killed.
kill -9 $target 2>/dev/null
sleep 0.2
kill -0 $target 2>/dev/null || echo KILLED-$target
`
	out, _ := execOut(t, inst, s, backend.ProcessSpec{}, "/bin/sh", "-c", probe, "sh", "1")
	for _, w := range []string{"KILLED", "ENVIRON", "TRACED", "MEM"} {
		if strings.Contains(out, w) {
			t.Errorf("a command reached init (%s):\n%s", w, out)
		}
	}
	// Nor can any signal end it: init handles those its runtime would
	// end on, and ignores them.
	execOut(t, inst, s, backend.ProcessSpec{}, "/bin/sh", "-c", "for s in $(seq 1 31); do kill -$s 1 2>/dev/null; done; true")
	// The session lives on.
	if out, _ := execOut(t, inst, s, backend.ProcessSpec{}, "echo", "alive"); out != "alive\n" {
		t.Fatalf("after the probes: %q", out)
	}
	// Control: the same probes reach a process of the command's own.
	out, _ = execOut(t, inst, s, backend.ProcessSpec{}, "/bin/sh", "-c", "sleep 60 & pid=$!; /bin/sh -c \"$1\" sh $pid", "sh", probe)
	for _, w := range []string{"ENVIRON", "MEM", "KILLED"} {
		if !strings.Contains(out, w) {
			t.Errorf("control: the probe did not reach the command's own child (%s):\n%s", w, out)
		}
	}
}

// TestSessionWallTimeout: a process's wall clock ends that process
// (cause timeout), as its output limit does (output), and the session
// goes on, as it does after a command that cannot start.
func TestSessionWallTimeout(t *testing.T) {
	inst, s := session(t)
	start := time.Now()
	_, st := execOut(t, inst, s, backend.ProcessSpec{Wall: 300 * time.Millisecond}, "sleep", "30")
	if st.Cause != backend.CauseTimeout || time.Since(start) > 10*time.Second {
		t.Errorf("cause %s after %v, want timeout", st.Cause, time.Since(start))
	}
	if out, st := execOut(t, inst, s, backend.ProcessSpec{Output: 10}, "/bin/sh", "-c", "yes | head -c 100000"); st.Cause != backend.CauseOutput || len(out) != 10 {
		t.Errorf("output limit: cause %s, %d bytes, want output, 10", st.Cause, len(out))
	}
	_, err := inst.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"/no/such/command"}, Env: s.Env, Dir: s.Dir}, backend.Stdio{})
	if !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("a missing command: %v, want ErrNotFound", err)
	}
	big := []string{"/bin/true", strings.Repeat("x", 4<<20)}
	if _, err := inst.Exec(context.Background(), &backend.ProcessSpec{Args: big, Env: s.Env, Dir: s.Dir}, backend.Stdio{}); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("a command line too long for a request: %v", err)
	}
	if out, st := execOut(t, inst, s, backend.ProcessSpec{}, "echo", "still"); out != "still\n" || st.Cause != backend.CauseExit {
		t.Errorf("after the limits: %q, cause %s", out, st.Cause)
	}
}

// TestSessionInitKilled: a session whose init is killed from outside
// ends: its processes with it, its cgroup removed, Done closed, and
// every later Exec refused.
func TestSessionInitKilled(t *testing.T) {
	inst, s := session(t)
	pid, cgroups := sessionInit(t)
	marker := fmt.Sprintf("%d.%d", 4000+os.Getpid()%1000, time.Now().UnixNano()%1000)
	bg, err := inst.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"sleep", marker}, Env: s.Env, Dir: s.Dir}, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	select {
	case <-inst.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after init was killed")
	}
	st, err := bg.Wait()
	if err != nil || st.Cause != backend.CauseKilled || len(st.LimitsHit) != 0 {
		t.Errorf("process of a killed session: %+v, %v; want cause killed, no limit hit (a kill is none)", st, err)
	}
	checkGone(t, "after init was killed", marker, cgroups)
	if _, err := inst.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"true"}}, backend.Stdio{}); !errors.Is(err, native.ErrEnded) {
		t.Errorf("exec after init died: %v, want ErrEnded", err)
	}
}

// TestSessionConcurrentExec: commands started at once in one session
// each get their own output and status.
func TestSessionConcurrentExec(t *testing.T) {
	inst, s := session(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, st := execOut(t, inst, s, backend.ProcessSpec{}, "/bin/sh", "-c", fmt.Sprintf("echo %d; exit %d", i, i))
			if out != fmt.Sprintf("%d\n", i) || st.ExitCode != i {
				t.Errorf("exec %d: %q exit %d", i, out, st.ExitCode)
			}
		}()
	}
	wg.Wait()
}

// TestSessionTty: a process with a terminal has it as stdin, stdout and
// controlling terminal (/dev/tty opens), of the size asked, resized on
// request.
func TestSessionTty(t *testing.T) {
	inst, s := session(t)
	inR, inW := io.Pipe()
	var out syncBuffer
	p, err := inst.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"/bin/sh", "-c", "test -t 0 && test -t 1 && echo TTY; stty size; read line; stty size; exec </dev/tty && echo DEVTTY"}, Env: s.Env, Dir: s.Dir, Tty: true, Rows: 30, Cols: 100}, backend.Stdio{Stdin: inR, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "30 100") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Resize(40, 120); err != nil {
		t.Fatal(err)
	}
	inW.Write([]byte("go\n"))
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"TTY", "30 100", "40 120", "DEVTTY"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("no %q in the terminal's output (exit %d):\n%s", w, st.ExitCode, out.String())
		}
	}
}

// TestSessionTerminalNotPassed: a terminal given as the stdin of a process
// without Tty is read for it through a pipe, never handed to it; an
// anonymous pipe is (the control: a session's stdin is the daemon's own
// pipe, which nothing on the host reads). Other files are read through a pipe
// too: TestStdinFileStaysOnTheHost.
func TestSessionTerminalNotPassed(t *testing.T) {
	inst, s := session(t)
	master, slave, err := pty.Open(0, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	pw.Write([]byte("hello\n"))
	pw.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(pr.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	pipeLink := fmt.Sprintf("pipe:[%d]\n", st.Ino)
	master.Write([]byte("hello\n"))
	for _, in := range []*os.File{slave, pr} {
		var out bytes.Buffer
		p, err := inst.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"/bin/sh", "-c", "test -t 0 && echo TERMINAL; readlink /proc/self/fd/0; head -n 1"}, Env: s.Env, Dir: s.Dir}, backend.Stdio{Stdin: in, Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		p.Wait()
		got := out.String()
		if in == pr {
			if got != pipeLink+"hello\n" {
				t.Errorf("stdin, a pipe: %q, want %q: the pipe itself", got, pipeLink+"hello\n")
			}
			continue
		}
		if !strings.HasPrefix(got, "pipe:[") || got == pipeLink+"hello\n" || !strings.HasSuffix(got, "]\nhello\n") {
			t.Errorf("stdin %s: %q, want a pipe of its own, then hello", in.Name(), got)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestSessionDiesWithCaller: a session's sandbox ends with the process
// that created it, even one killed with SIGKILL, and even when the thread
// that asked for it has ended (the kernel's parent-death signal follows
// the thread that forked init). The caller is this test binary run again
// (MOAT_TEST_SESSION_CALLER, see sessionCaller).
func TestSessionDiesWithCaller(t *testing.T) {
	marker := fmt.Sprintf("%d.%d", 6000+os.Getpid()%1000, time.Now().UnixNano()%1000)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MOAT_TEST_SESSION_CALLER="+marker)
	cmd.Dir = t.TempDir()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	var line string
	fmt.Fscan(out, &line)
	if line != "ready" {
		cmd.Process.Kill()
		t.Fatalf("the caller said %q: %s", line, errb.String())
	}
	if len(proctest.Appear(func() []int { return proctest.Find("sleep " + marker) }, 5*time.Second)) != 1 {
		t.Error("the session's process is not running")
	}
	inits := proctest.Children(cmd.Process.Pid)
	if len(inits) == 0 {
		t.Error("the caller has no child: where is the session's init?")
	}
	cmd.Process.Kill()
	if left := proctest.Gone(func() []int { return proctest.Find("sleep " + marker) }, 5*time.Second); len(left) > 0 {
		t.Errorf("the session's processes outlived their caller: %v", left)
	}
	for _, pid := range inits {
		if left := proctest.Gone(func() []int { return alive(pid) }, 5*time.Second); len(left) > 0 {
			t.Errorf("the session's init %d outlived its caller", pid)
		}
	}
}

// alive returns pid if that process exists and is not a zombie.
func alive(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil || strings.Contains(string(b), ") Z ") {
		return nil
	}
	return []int{pid}
}

// sessionCaller creates a session from a thread that then ends, starts a
// background process in it, says "ready" and waits to be killed.
func sessionCaller(marker string) {
	ws, err := os.Getwd() // the test's temporary directory
	if err != nil {
		panic(err)
	}
	s, err := compileSpec(ws, "/bin/true")
	if err != nil {
		panic(err)
	}
	got := make(chan backend.Instance)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		inst, err := (&native.Backend{}).Create(context.Background(), s, backend.Stdio{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		got <- inst
	}()
	inst := <-got
	time.Sleep(50 * time.Millisecond) // the thread above has ended by now
	if _, err := inst.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"sleep", marker}, Env: s.Env, Dir: s.Dir}, backend.Stdio{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
	os.Exit(1)
}

// BenchmarkSessionExec: /bin/true in a live session, to completion.
func BenchmarkSessionExec(b *testing.B) {
	s := spec(b, b.TempDir(), "/bin/true")
	inst, err := (&native.Backend{}).Create(context.Background(), s, backend.Stdio{})
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Destroy(context.Background())
	p := &backend.ProcessSpec{Args: []string{"/bin/true"}, Env: s.Env, Dir: s.Dir}
	b.ResetTimer()
	for range b.N {
		proc, err := inst.Exec(context.Background(), p, backend.Stdio{})
		if err != nil {
			b.Fatal(err)
		}
		if st, err := proc.Wait(); err != nil || st.ExitCode != 0 {
			b.Fatal(st, err)
		}
	}
}
