//go:build linux

package native_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
)

// execLog records the exec calls one checker is asked about.
type execLog struct {
	mu    sync.Mutex
	calls []backend.ExecCall
	deny  string // a program refused
}

func (l *execLog) check(c backend.ExecCall) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
	if len(c.Argv) > 0 && c.Argv[0] == l.deny {
		return errors.New("refused")
	}
	return nil
}

func (l *execLog) argv0s() (first []string, rest []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.calls {
		if c.First {
			first = append(first, c.Argv[0])
		} else {
			rest = append(rest, c.Argv[0])
		}
	}
	return first, rest
}

// checkedSession is a session whose execs are checked, sess its own
// checker (asked about what no command can be told for).
func checkedSession(t *testing.T, sess *execLog) (*backend.Spec, backend.Instance) {
	t.Helper()
	s := spec(t, t.TempDir(), "/bin/true")
	inst, err := (&native.Backend{}).Create(context.Background(), s, backend.Stdio{CheckExec: sess.check})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Destroy(context.Background()) })
	return s, inst
}

// TestSessionExecAttribution: in a session created with CheckExec, each
// command's execs go to the CheckExec of its own Exec, its first one
// marked First, a refusal failing the exec with EACCES; a session keeps
// no record of the hundreds of commands that left nothing behind. The
// session's own CheckExec is asked about nothing that can be told.
func TestSessionExecAttribution(t *testing.T) {
	var sess execLog
	s, inst := checkedSession(t, &sess)
	run := func(l *execLog, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		p := &backend.ProcessSpec{Args: args, Env: s.Env, Dir: s.Dir}
		proc, err := inst.Exec(context.Background(), p, backend.Stdio{Stdout: &out, Stderr: &out, CheckExec: l.check})
		if err != nil {
			t.Fatalf("exec %q: %v", args, err)
		}
		if _, err := proc.Wait(); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	a, b := &execLog{deny: "uname"}, &execLog{}
	out := run(a, "/bin/sh", "-c", "uname -s >/dev/null; echo uname $?; id -u >/dev/null; echo id $?")
	if !strings.Contains(out, "uname 126") || !strings.Contains(out, "id 0") {
		t.Errorf("output: %q", out)
	}
	// Positive control: the same programs, another checker.
	if out := run(b, "/bin/sh", "-c", "uname -s >/dev/null; echo uname $?"); !strings.Contains(out, "uname 0") {
		t.Errorf("control output: %q", out)
	}
	for name, l := range map[string]*execLog{"a": a, "b": b} {
		first, rest := l.argv0s()
		if len(first) != 1 || first[0] != "/bin/sh" || len(rest) == 0 || rest[0] != "uname" {
			t.Errorf("%s was asked: first %q, then %q", name, first, rest)
		}
	}
	for i := 0; i < 300; i++ {
		run(&execLog{}, "/bin/true")
	}
	if n := native.SessionLeadersForTesting(inst); n >= 300 {
		t.Errorf("the session remembers %d commands", n)
	}
	if first, rest := sess.argv0s(); len(first)+len(rest) != 0 {
		t.Errorf("the session's checker was asked: %q %q", first, rest)
	}
}

// TestSessionPidReuse: a command that takes an ended command's pid for
// a session of its own does not get that command's checker. Command A
// leaves nothing behind; the host's next pid is then set (ns_last_pid)
// so that the child command B forks takes A's number on the host, the
// number the host knows A's session by. The child leads a session there
// (setsid) and, re-parented to init, runs `id`. That exec is B's: its
// session was recorded as B's when it was made (before setsids were told
// to the host, it was A's). Positive controls: the child did get A's
// number (tried again when another process on the host took it first),
// and B's checker is asked.
func TestSessionPidReuse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setting the host's next pid (ns_last_pid) needs root")
	}
	var sess execLog
	s, inst := checkedSession(t, &sess)
	start := func(l *execLog, stdin io.Reader, args ...string) backend.Process {
		t.Helper()
		p := &backend.ProcessSpec{Args: args, Env: s.Env, Dir: s.Dir}
		proc, err := inst.Exec(context.Background(), p, backend.Stdio{Stdin: stdin, CheckExec: l.check})
		if err != nil {
			t.Fatalf("exec %q: %v", args, err)
		}
		return proc
	}
	pidNS := func(pid int) string { l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); return l }
	sandboxNS := pidNS(native.SessionInitPidForTesting(inst))
	// hostPid finds the host pid of the sandbox's process nsPid.
	hostPid := func(nsPid string) int {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" && f[len(f)-1] == nsPid && pidNS(pid) == sandboxNS {
					return pid
				}
			}
		}
		return 0
	}
	has := func(l *execLog, argv0 string) bool {
		first, rest := l.argv0s()
		return slices.Contains(first, argv0) || slices.Contains(rest, argv0)
	}
	for attempt := 1; ; attempt++ {
		a, b := &execLog{}, &execLog{}
		procA := start(a, nil, "/bin/sh", "-c", "exit 0")
		if _, err := procA.Wait(); err != nil {
			t.Fatal(err)
		}
		pidA := native.LeaderPidForTesting(inst, procA)
		if pidA == 0 {
			t.Fatal("A's first process was not seen")
		}
		// A process is told from an earlier one at its pid by its start
		// time, in clock ticks: B's child starts ticks after A did, as
		// any reuse of a pid does that was not forced within one (it
		// failed now and then when the child came within A's tick).
		time.Sleep(50 * time.Millisecond)
		child := filepath.Join(s.Dir, fmt.Sprintf("child%d", attempt))
		inR, inW := io.Pipe()
		procB := start(b, inR, "/bin/sh", "-c", `read go; exec setsid -f sh -c 'echo $$ >`+child+`; sleep 0.5; exec id -u'`)
		// B waits in read; its child is the next process it makes.
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pidA-1)), 0); err != nil {
			t.Fatal(err)
		}
		inW.Write([]byte("go\n"))
		inW.Close()
		if _, err := procB.Wait(); err != nil {
			t.Fatal(err)
		}
		var nsPid []byte
		for deadline := time.Now().Add(5 * time.Second); len(nsPid) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			nsPid, _ = os.ReadFile(child)
		}
		got := hostPid(strings.TrimSpace(string(nsPid)))
		for deadline := time.Now().Add(10 * time.Second); !has(a, "id") && !has(b, "id") && !has(&sess, "id") && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if got != pidA {
			if attempt == 20 {
				t.Fatalf("B's child never took A's pid on the host (last: %d, not %d): the reuse was not set up", got, pidA)
			}
			continue
		}
		t.Logf("attempt %d: B's child took A's pid %d", attempt, pidA)
		if has(a, "id") || !has(b, "id") || has(&sess, "id") {
			t.Errorf("the exec in the session made at A's pid was asked of A %v, B %v, the session %v", has(a, "id"), has(b, "id"), has(&sess, "id"))
		}
		return
	}
}

// TestSessionSetsidOfAThread: a setsid called by a thread other than its
// process's first makes a session whose id is the process's, and the
// record is kept under that id, not the thread's (the supervisor is told
// the thread's). Positive control: the thread's id is another number.
func TestSessionSetsidOfAThread(t *testing.T) {
	_, inst := checkedSession(t, &execLog{})
	// Goroutines locked to threads until one is not the first thread
	// (which the first of them may be locked to).
	tid := make(chan int)
	release := make(chan struct{})
	defer close(release)
	thread := os.Getpid()
	for range 3 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tid <- unix.Gettid()
			<-release
		}()
		if thread = <-tid; thread != os.Getpid() {
			break
		}
	}
	if thread == os.Getpid() {
		t.Fatal("no thread but the process's first to try")
	}
	ids := native.NoteSetsidForTesting(inst, thread)
	if !slices.Contains(ids, os.Getpid()) || slices.Contains(ids, thread) {
		t.Errorf("records under %v; want the process's id %d, not the thread's %d", ids, os.Getpid(), thread)
	}
}
