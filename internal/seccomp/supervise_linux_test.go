package seccomp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/internal/proctest"
)

// TestSuperviseExec: a process under an exec-checking filter starts a
// program only when the supervisor's Exec lets it, and the supervisor
// reads the path and argv the program was given, whether it answers at
// once or later. Positive control: the same program with other arguments
// runs; a refused system call is still
// answered with its errno and recorded.
func TestSuperviseExec(t *testing.T) {
	if NativeArch() == "" {
		t.Skipf("seccomp filters are not compiled for %s", runtime.GOARCH)
	}
	prog := mustCompileHelper(Default(), NativeArch())
	parent, child, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=exec-check")
	cmd.ExtraFiles = []*os.File{child}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	fd, ok := recvFD(parent)
	if !ok {
		cmd.Wait()
		t.Fatalf("no listener from the helper; stderr:\n%s", stderr.String())
	}
	defer unix.Close(fd)
	var mu sync.Mutex
	var calls []ExecCall
	var refused, setsids []int
	sup := &Supervisor{
		Setsid: func(pid int) func() { mu.Lock(); setsids = append(setsids, pid); mu.Unlock(); return nil },
		Prog:   prog,
		Record: func(_, nr, errno int) { mu.Lock(); refused = append(refused, nr); mu.Unlock() },
		Exec: func(c ExecCall) (int, func(context.Context) int) {
			mu.Lock()
			calls = append(calls, c)
			mu.Unlock()
			// Both answers also come later, from a goroutine: "ok" is let
			// through and "deny-me" refused there.
			switch {
			case slices.Contains(c.Argv, "deny-me"):
				return 0, func(context.Context) int { return int(unix.EACCES) }
			case slices.Contains(c.Argv, "ok"):
				return int(unix.EACCES), func(context.Context) int { return 0 }
			}
			return 0, nil
		},
	}
	stop, stopW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { sup.Serve(fd, int(stop.Fd())); close(done) }()
	res := map[string]string{}
	decErr := json.NewDecoder(out).Decode(&res)
	werr := cmd.Wait()
	stopW.Close()
	<-done
	stop.Close()
	if decErr != nil || werr != nil {
		t.Fatalf("helper: %v %v; stderr:\n%s", decErr, werr, stderr.String())
	}
	want := map[string]string{
		"exec /bin/true ok":      "ok",
		"exec /bin/true deny-me": "EACCES",
		"sh runs a denied child": "exit status 126",
		"sh runs an allowed one": "ok",
		"unshare":                "EPERM",
		"long argv":              "ok",
		"setsid":                 "ok",
	}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("%s: %q, want %q", k, res[k], v)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var sawSh, sawLong, sawAfter bool
	for _, c := range calls {
		sawAfter = sawAfter || slices.Equal(c.Argv, []string{"/bin/true", "after"})
		if c.Path == "/bin/sh" && len(c.Argv) == 3 && c.Argv[2] == "/bin/true deny-me; s=$?; /bin/true after; exit $s" {
			sawSh = true
		}
		if len(c.Argv) > 0 && c.Argv[0] == "long" {
			// Read whole: 5000 words are far within what execve takes.
			sawLong = !c.Truncated && len(c.Argv) == 5001
		}
	}
	if !sawSh || !sawLong || !sawAfter {
		t.Errorf("the supervisor did not read the calls it was asked about (sh %v, long argv whole %v, after %v): %+v", sawSh, sawLong, sawAfter, calls[:min(len(calls), 8)])
	}
	if len(refused) == 0 {
		t.Error("the refused unshare was not recorded")
	}
	if pid, _ := strconv.Atoi(res["setsid pid"]); pid == 0 || !slices.Contains(setsids, pid) {
		t.Errorf("the supervisor was told of setsids by %v, not by the child that made one (%q)", setsids, res["setsid pid"])
	}
}

// execCheckHelper installs the exec-checking filter, hands its listener
// to the test on fd 3, and tries programs.
func execCheckHelper() int {
	if err := setNoNewPrivs(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fd, err := InstallObservedNotify(mustCompileHelper(Default(), NativeArch()), Notify{Exec: true, Setsid: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := unix.Sendmsg(3, []byte{0}, unix.UnixRights(fd), nil, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	unix.Close(fd)
	unix.Close(3)
	res := map[string]string{}
	res["exec /bin/true ok"] = errName(exec.Command("/bin/true", "ok").Run())
	res["exec /bin/true deny-me"] = errName(exec.Command("/bin/true", "deny-me").Run())
	// /bin/true cannot run, sh sees 126 and goes on to the next program.
	res["sh runs a denied child"] = errName(exec.Command("/bin/sh", "-c", "/bin/true deny-me; s=$?; /bin/true after; exit $s").Run())
	res["sh runs an allowed one"] = errName(exec.Command("/bin/sh", "-c", "/bin/true fine").Run())
	res["unshare"] = errName(unix.Unshare(unix.CLONE_NEWUSER))
	long := exec.Command("/bin/true")
	long.Args = []string{"long"}
	for range 5000 {
		long.Args = append(long.Args, "x")
	}
	res["long argv"] = errName(long.Run())
	// A child that leads a session of its own: its setsid goes on, and
	// the supervisor is told its pid first.
	lead := exec.Command("/bin/true", "leader")
	lead.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	res["setsid"] = errName(lead.Run())
	if lead.Process != nil {
		res["setsid pid"] = strconv.Itoa(lead.Process.Pid)
	}
	return report(res)
}

// TestExecFailsClosedUnsupervised: an exec the filter hands to a
// supervisor fails when none will answer (its listener closed: moat gone,
// or its supervisor ended), rather than going on unchecked. Positive
// control: the same program runs before the filter.
func TestExecFailsClosedUnsupervised(t *testing.T) {
	res, err := runHelper(t, "exec-unsupervised")
	if err != nil {
		t.Fatal(err)
	}
	// The kernel fails a call no listener can answer with ENOSYS.
	if res["before"] != "ok" || res["after"] != "ENOSYS" {
		t.Errorf("/bin/true before the filter: %q, after it with no supervisor: %q; want ok, then ENOSYS", res["before"], res["after"])
	}
}

// execUnsupervisedHelper installs the exec-checking filter, closes its
// listener unread, and tries a program before and after.
func execUnsupervisedHelper() int {
	res := map[string]string{"before": errName(exec.Command("/bin/true").Run())}
	if err := setNoNewPrivs(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fd, err := InstallObservedNotify(mustCompileHelper(Default(), NativeArch()), Notify{Exec: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	unix.Close(fd)
	res["after"] = errName(exec.Command("/bin/true").Run())
	return report(res)
}

func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "parent"), os.NewFile(uintptr(fds[1]), "child"), nil
}

func recvFD(sock *os.File) (int, bool) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, 0)
	if err != nil {
		return -1, false
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, false
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, false
	}
	return fds[0], true
}

// threads is the number of threads of this process.

// TestListenerWaitHoldsNoThread: supervisors waiting for their listeners
// (pipes stand in for them: readable, or hung up) wait in the runtime's
// poller, not on a thread each; the blocking poll(2) they fall back to
// holds one each (the control, which shows the count can tell). Each
// wait ends as it should: true once the listener is readable; false once
// it hangs up (no user left) or the stop pipe is written or closed.
func TestListenerWaitHoldsNoThread(t *testing.T) {
	type pair struct{ l, lw, s, sw int }
	mk := func(n int) []pair {
		var ps []pair
		for range n {
			var l, s [2]int
			if err := unix.Pipe2(l[:], unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			if err := unix.Pipe2(s[:], unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			ps = append(ps, pair{l[0], l[1], s[0], s[1]})
		}
		return ps
	}
	closeAll := func(ps []pair) {
		for _, p := range ps {
			for _, fd := range []int{p.l, p.lw, p.s, p.sw} {
				unix.Close(fd)
			}
		}
	}
	start := func(ps []pair, poller bool) []chan bool {
		var out []chan bool
		for _, p := range ps {
			ch := make(chan bool, 1)
			w := &listenerWait{fd: p.l, stop: p.s}
			if poller {
				w = newListenerWait(p.l, p.s)
				if w.f == nil {
					t.Fatal("the poller did not take a pipe")
				}
			}
			go func() {
				defer w.close()
				ch <- w.wait()
			}()
			out = append(out, ch)
		}
		return out
	}
	settle := func() { time.Sleep(200 * time.Millisecond) }

	const n = 32
	base := proctest.Threads(t)
	ps := mk(n)
	defer closeAll(ps)
	res := start(ps, true)
	settle()
	if grew := proctest.Threads(t) - base; grew >= n/2 {
		t.Errorf("%d waits in the poller: %d more threads", n, grew)
	}
	unix.Write(ps[0].lw, []byte{1})
	unix.Close(ps[1].lw)
	ps[1].lw = -1
	unix.Write(ps[2].sw, []byte{1})
	unix.Close(ps[3].sw)
	ps[3].sw = -1
	for i, want := range []bool{true, false, false, false} {
		select {
		case got := <-res[i]:
			if got != want {
				t.Errorf("wait %d: %v, want %v", i, got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("wait %d did not end", i)
		}
	}
	for i := 4; i < n; i++ {
		unix.Close(ps[i].sw)
		ps[i].sw = -1
		if got := <-res[i]; got {
			t.Errorf("wait %d ended true after its stop", i)
		}
	}

	// The control: the blocking poll(2) holds a thread per wait.
	base = proctest.Threads(t)
	cs := mk(n / 2)
	defer closeAll(cs)
	cres := start(cs, false)
	settle()
	if grew := proctest.Threads(t) - base; grew < n/4 {
		t.Errorf("control: %d blocking waits, only %d more threads", n/2, grew)
	}
	for i, p := range cs {
		unix.Write(p.lw, []byte{1})
		if got := <-cres[i]; !got {
			t.Errorf("control wait %d: false after its listener became readable", i)
		}
	}
}
