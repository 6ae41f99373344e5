//go:build linux

package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/internal/proctest"
)

// The load tests are bounded for CI; MOAT_TEST_LOAD=full runs the sizes
// of the issue. 200 sessions at once take a few seconds on 2 cores, so
// CI makes them all; 10,000 execs take about 15 s, so CI runs 1,000.
// -test.short (the emulated guest of scripts/vmtest.sh, many times
// slower) runs a tenth of CI's.
func loadSize(ci, full int) int {
	switch {
	case os.Getenv("MOAT_TEST_LOAD") == "full":
		return full
	case testing.Short():
		return max(ci/10, 2)
	}
	return ci
}

// hostTraces is what sessions could leave on the host: this process's
// children (the sandboxes' inits), its mounts, the cgroups beside its
// own, and the daemon's state directory.
type hostTraces struct {
	children []int
	mounts   []string
	cgroups  []string
	state    []string
}

func traces(t *testing.T, state string) hostTraces {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var h hostTraces
	h.children = proctest.Children(os.Getpid())
	for _, line := range strings.Split(strings.TrimSpace(string(mi)), "\n") {
		// The mount's id and parent's id aside: what is mounted where.
		if f := strings.Fields(line); len(f) > 4 {
			h.mounts = append(h.mounts, strings.Join(f[2:], " "))
		}
	}
	h.cgroups = moatCgroups()
	filepath.Walk(state, func(p string, fi os.FileInfo, err error) error {
		if err == nil && p != state {
			rel, _ := filepath.Rel(state, p)
			h.state = append(h.state, rel)
		}
		return nil
	})
	return h
}

// moatCgroups lists the moat-* cgroups beside and beneath this process's
// own (unified hierarchy), where a session's sandbox makes its cgroup.
func moatCgroups() []string {
	data, _ := os.ReadFile("/proc/self/cgroup")
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		rel, ok := strings.CutPrefix(line, "0::")
		if !ok {
			continue
		}
		base := filepath.Join("/sys/fs/cgroup", rel)
		for _, dir := range []string{base, filepath.Dir(base)} {
			m, _ := filepath.Glob(filepath.Join(dir, "moat-*"))
			out = append(out, m...)
		}
	}
	sort.Strings(out)
	return out
}

// checkNoTraces waits for what sessions left to go: every child of this
// process not there before, mounts over those before, cgroups made since,
// and anything in the state directory but its lock and directories.
func checkNoTraces(t *testing.T, before hostTraces, state string) {
	t.Helper()
	isNew := func(pids []int) []int {
		var out []int
		for _, p := range pids {
			found := false
			for _, b := range before.children {
				found = found || b == p
			}
			if !found {
				out = append(out, p)
			}
		}
		return out
	}
	if left := proctest.Gone(func() []int { return isNew(proctest.Children(os.Getpid())) }, 20*time.Second); len(left) > 0 {
		t.Errorf("%d sandboxes outlived their sessions: %v", len(left), left)
	}
	after := traces(t, state)
	for _, mnt := range after.mounts {
		if !contains(before.mounts, mnt) {
			t.Errorf("mount left in the host's namespace: %s", mnt)
		}
	}
	for _, cg := range after.cgroups {
		if !contains(before.cgroups, cg) {
			t.Errorf("cgroup left: %s", cg)
		}
	}
	for _, p := range after.state {
		switch p {
		// ended.jsonl: what the next daemon tells of the ended sessions
		// (bounded), kept on purpose.
		case "daemon", "daemon/lock", "daemon/sessions", "daemon/workspaces", "daemon/reviews", "daemon/ended.jsonl":
		default:
			if strings.HasPrefix(p, "daemon/") {
				t.Errorf("left in the state directory: %s", p)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// TestManySessions: sessions made at once all work and each sees only
// its own workspace; ended, they leave nothing.
func TestManySessions(t *testing.T) {
	n := loadSize(200, 200)
	d := startDaemon(t, daemon.Config{MaxSessions: n, MaxTotal: n}, nil)
	before := traces(t, d.state)
	ctx := context.Background()
	start := time.Now()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{})
			if err != nil {
				t.Errorf("session %d: %v", i, err)
				return
			}
			ids[i] = s.ID
			var out bytes.Buffer
			rep, err := d.c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo " + strconv.Itoa(i) + " > mine; ls"}}, &out, io.Discard)
			if err != nil || rep.ExitCode != 0 || out.String() != "mine\n" {
				t.Errorf("session %d: %q, %+v, %v", i, out.String(), rep, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d sessions made and used at once in %v", n, time.Since(start).Round(time.Millisecond))
	if t.Failed() {
		return
	}
	if got := d.m.Count(); got != n {
		t.Errorf("%d sessions live, want %d", got, n)
	}
	for i, id := range ids {
		if data, err := d.c.ReadFile(ctx, id, "mine"); err != nil || string(data) != strconv.Itoa(i)+"\n" {
			t.Errorf("session %d's file: %q, %v", i, data, err)
		}
	}
	start = time.Now()
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.c.DeleteSession(ctx, id); err != nil {
				t.Errorf("delete %s: %v", id, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d sessions ended in %v", n, time.Since(start).Round(time.Millisecond))
	checkNoTraces(t, before, d.state)
}

// TestManyExecs: commands run concurrently in a few sessions, each with
// its own output and exit status.
func TestManyExecs(t *testing.T) {
	n := loadSize(1000, 10000)
	const sessions, workers = 4, 8
	d := startDaemon(t, daemon.Config{}, nil)
	before := traces(t, d.state)
	ctx := context.Background()
	var ids []string
	for range sessions {
		ids = append(ids, d.create(t, &client.CreateSessionRequest{}).ID)
	}
	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var out bytes.Buffer
				rep, err := d.c.Exec(ctx, ids[i%sessions], &client.ExecRequest{Args: []string{"sh", "-c", fmt.Sprintf("echo %d; exit %d", i, i%7)}}, &out, io.Discard)
				if err != nil || rep.ExitCode != i%7 || out.String() != fmt.Sprintf("%d\n", i) {
					mu.Lock()
					if failures++; failures <= 5 {
						t.Errorf("exec %d: %q, %+v, %v", i, out.String(), rep, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	t.Logf("%d execs in %d sessions by %d clients in %v", n, sessions, workers, time.Since(start).Round(time.Millisecond))
	total := 0
	for _, id := range ids {
		s, err := d.c.Session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		total += s.Execs
		if err := d.c.DeleteSession(ctx, id); err != nil {
			t.Error(err)
		}
	}
	if total != n {
		t.Errorf("the sessions counted %d execs, want %d", total, n)
	}
	checkNoTraces(t, before, d.state)
}

// parentOf returns the parent pid of pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	var state string
	var ppid int
	fmt.Sscanf(s[strings.LastIndexByte(s, ')')+1:], " %s %d", &state, &ppid)
	return ppid
}

// TestKilledExecsAndSandboxes: a command killed with SIGKILL from the host
// ends its exec with the signal and leaves its session working; a
// sandbox whose init is killed ends its session, which the daemon then
// reaps like any other. Nothing is left either way.
func TestKilledExecsAndSandboxes(t *testing.T) {
	d := startDaemon(t, daemon.Config{Tick: 100 * time.Millisecond}, nil)
	before := traces(t, d.state)
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{})

	// A foreground exec killed.
	type result struct {
		rep *client.ExitReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := d.c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"sleep", "765431"}}, io.Discard, io.Discard)
		done <- result{rep, err}
	}()
	pids := proctest.Appear(func() []int { return proctest.Find("sleep 765431") }, 10*time.Second)
	if len(pids) != 1 {
		t.Fatalf("the command: %v", pids)
	}
	syscall.Kill(pids[0], syscall.SIGKILL)
	r := <-done
	if r.err != nil || r.rep.ExitCode != 137 {
		t.Errorf("killed exec: %+v, %v", r.rep, r.err)
	}
	// Positive control: the session still runs commands.
	if out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"echo", "alive"}}); out != "alive\n" || rep.ExitCode != 0 {
		t.Errorf("after the kill: %q %+v", out, rep)
	}

	// A background command killed: its process reports the signal.
	p, err := d.c.Start(ctx, s.ID, &client.ExecRequest{Args: []string{"sleep", "765432"}})
	if err != nil {
		t.Fatal(err)
	}
	pids = proctest.Appear(func() []int { return proctest.Find("sleep 765432") }, 10*time.Second)
	if len(pids) != 1 {
		t.Fatalf("the background command: %v", pids)
	}
	sandboxPid := parentOf(t, pids[0]) // init, or the stage between
	syscall.Kill(pids[0], syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ps, err := d.c.Processes(ctx, s.ID)
		if err == nil && len(ps) == 1 && !ps[0].Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed background command still runs: %+v %v", ps, err)
		}
	}
	if ps, _ := d.c.Processes(ctx, s.ID); len(ps) != 1 || ps[0].ID != p.ID || ps[0].Exit == nil || ps[0].Exit.ExitCode != 137 {
		t.Errorf("the killed background command: %+v", ps)
	}

	// The sandbox itself killed: every process of it goes, the session
	// ends, and Get says so.
	if _, err := d.c.Start(ctx, s.ID, &client.ExecRequest{Args: []string{"sleep", "765433"}}); err != nil {
		t.Fatal(err)
	}
	proctest.Appear(func() []int { return proctest.Find("sleep 765433") }, 10*time.Second)
	for pid := sandboxPid; pid != os.Getpid() && pid > 1; pid = parentOf(t, pid) {
		sandboxPid = pid // the topmost process below the daemon: the sandbox's init
	}
	if err := syscall.Kill(sandboxPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if left := proctest.Gone(func() []int { return proctest.Find("sleep 765433") }, 10*time.Second); len(left) > 0 {
		t.Errorf("a command outlived its sandbox's init: %v", left)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := d.c.Session(ctx, s.ID); apiCode(err) == client.CodeEnded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session of a killed sandbox did not end")
		}
	}
	// Positive control: the daemon serves new sessions.
	s2 := d.create(t, &client.CreateSessionRequest{})
	if out, _, _ := run(t, d.c, s2.ID, &client.ExecRequest{Args: []string{"echo", "ok"}}); out != "ok\n" {
		t.Errorf("a new session after the kill: %q", out)
	}
	d.c.DeleteSession(ctx, s2.ID)
	checkNoTraces(t, before, d.state)
}

// TestDaemonKilledWithPool: a daemon with a warm pool, killed with SIGKILL
// while a claimed session's command writes to a workspace of the
// tenant's, leaves no process; the next daemon reaps the claimed and the
// pooled sessions, and what was written before the kill is intact.
func TestDaemonKilledWithPool(t *testing.T) {
	dir, err := os.MkdirTemp("", "moat-daemon-pool-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tpl := filepath.Join(dir, "templates")
	os.Mkdir(tpl, 0o700)
	if err := os.WriteFile(filepath.Join(tpl, "sh.toml"), []byte("[limits]\nwall = \"1h\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	state, sock := filepath.Join(dir, "state"), filepath.Join(dir, "moat.sock")
	cmd, c := daemonProcess(t, state, sock, "MOAT_TEST_TEMPLATES="+tpl, "MOAT_TEST_POOL=sh=2")
	ctx := context.Background()
	waitPoolReady(t, sock, "sh", 2)
	pooled, err := c.CreateSession(ctx, &client.CreateSessionRequest{Template: "sh"})
	if err != nil {
		t.Fatal(err)
	}
	own, err := c.CreateSession(ctx, &client.CreateSessionRequest{Template: "sh", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	// What is written before the kill: by the files API and by commands.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<15)
	if err := c.WriteFile(ctx, own.ID, "api.bin", big, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, c, own.ID, &client.ExecRequest{Args: []string{"sh", "-c", "seq 100000 > seq.txt && sync"}})
	// Mid-exec: a command appending, one sleeping in each session.
	go c.Exec(ctx, own.ID, &client.ExecRequest{Args: []string{"sh", "-c", "while :; do echo line >> log.txt; done"}}, nil, nil)
	go c.Exec(ctx, pooled.ID, &client.ExecRequest{Args: []string{"sleep", "654321"}}, nil, nil)
	find := func() []int { return append(proctest.Find("sleep 654321"), proctest.Find("echo line >> log.txt")...) }
	for deadline := time.Now().Add(10 * time.Second); len(find()) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the commands did not start: %v", find())
		}
	}
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if left := proctest.Gone(find, 10*time.Second); len(left) > 0 {
		t.Errorf("processes outlived the daemon: %v", left)
	}

	m, err := daemon.New(daemon.Config{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(ctx)
	// The two claimed sessions and the two pooled sandboxes (the pool was
	// refilled after the claim).
	if len(m.Reaped) < 3 || !contains(m.Reaped, pooled.ID) || !contains(m.Reaped, own.ID) {
		t.Errorf("reaped %v, want %s, %s and the pooled sessions", m.Reaped, pooled.ID, own.ID)
	}
	for _, sub := range []string{"sessions", "workspaces"} {
		if ents, _ := os.ReadDir(filepath.Join(state, "daemon", sub)); len(ents) != 0 {
			t.Errorf("%s left: %d", sub, len(ents))
		}
	}
	if data, err := os.ReadFile(filepath.Join(ws, "api.bin")); err != nil || !bytes.Equal(data, big) {
		t.Errorf("api.bin after the kill: %d bytes, %v", len(data), err)
	}
	want := new(strings.Builder)
	for i := 1; i <= 100000; i++ {
		fmt.Fprintln(want, i)
	}
	if data, err := os.ReadFile(filepath.Join(ws, "seq.txt")); err != nil || string(data) != want.String() {
		t.Errorf("seq.txt after the kill: %d bytes, %v", len(data), err)
	}
	// The file being appended to holds whole lines only.
	if data, err := os.ReadFile(filepath.Join(ws, "log.txt")); err != nil || len(data) == 0 || strings.ReplaceAll(string(data), "line\n", "") != "" {
		t.Errorf("log.txt after the kill: %d bytes, %v", len(data), err)
	}
	ents, _ := os.ReadDir(ws)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "api.bin log.txt seq.txt" {
		t.Errorf("the workspace holds %v", names)
	}
}
