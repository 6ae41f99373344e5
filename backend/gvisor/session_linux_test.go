package gvisor_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/backendtest"
	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/internal/proctest"
)

// TestSessionDiesWithCaller: when the process holding a gvisor session
// is killed (SIGKILL: no clean-up of its own), runsc, the sandbox and the
// command die with it, and its reaper removes what the dead one left on
// the host at once, without waiting for another run: its directory, the
// mounts in it, its cgroup (under a memory limit, where cgroups are
// usable). The controls: while the caller lives, its command, runsc, the
// directory, a mount in it and the cgroup are there to find.
func TestSessionDiesWithCaller(t *testing.T) {
	runsc := usable(t)
	ws := backendtest.Workspace(t)
	tmp := t.TempDir()
	os.Chmod(tmp, 0o755)
	t.Setenv("TMPDIR", tmp)
	id := fmt.Sprintf("dies%d", time.Now().UnixNano()%1e9)
	c := exec.Command("/proc/self/exe", "-test.run=^$")
	c.Env = append(os.Environ(), "MOAT_TEST_GVISOR_CALLER="+ws, "MOAT_TEST_GVISOR_ID="+id)
	be := &gvisor.Backend{Runsc: runsc}
	caps := be.Capabilities()
	withCgroup := caps.Memory
	if withCgroup {
		c.Env = append(c.Env, "MOAT_TEST_GVISOR_MEMORY=1")
	} else {
		t.Logf("no cgroup here (%s): the reaper's removal of one is not tested", caps.MemoryWhy)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		c.Process.Kill()
		c.Wait()
		t.Fatalf("caller: %q", line)
	}
	find := func() []int { return append(proctest.Find("4244.4244"), proctest.Find("moat-"+id)...) }
	mounts := func() []string {
		data, _ := os.ReadFile("/proc/self/mountinfo")
		var in []string
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, tmp+"/") {
				in = append(in, l)
			}
		}
		return in
	}
	cgroups := func() []string {
		var found []string
		for _, pat := range []string{"/sys/fs/cgroup/moat-", "/sys/fs/cgroup/*/moat-", "/sys/fs/cgroup/*/*/moat-", "/sys/fs/cgroup/*/*/*/moat-", "/sys/fs/cgroup/*/*/*/*/moat-"} {
			m, _ := filepath.Glob(pat + id)
			found = append(found, m...)
		}
		return found
	}
	if len(find()) == 0 {
		t.Error("control: no process of the live session found")
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "moat-gvisor-*")); len(dirs) == 0 {
		t.Error("control: the live session has no directory")
	}
	if len(mounts()) == 0 {
		t.Error("control: no mount in the live session's directory (runsc's network namespace)")
	}
	if withCgroup && len(cgroups()) == 0 {
		t.Error("control: the live session's cgroup is not there")
	}
	c.Process.Kill()
	c.Wait()
	if left := proctest.Gone(find, 10*time.Second); len(left) > 0 {
		t.Errorf("processes outlived their caller: %v", left)
	}
	var names, mnt, cg []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		left, _ := os.ReadDir(tmp)
		names = names[:0]
		for _, e := range left {
			names = append(names, e.Name())
		}
		if mnt, cg = mounts(), cgroups(); len(names) == 0 && len(mnt) == 0 && len(cg) == 0 {
			break
		}
	}
	if len(names) > 0 {
		t.Errorf("left in TMPDIR after the caller died: %s", strings.Join(names, " "))
	}
	if len(mnt) > 0 {
		t.Errorf("mounts left: %s", strings.Join(mnt, "\n"))
	}
	if len(cg) > 0 {
		t.Errorf("cgroups left: %v", cg)
	}
	reaper := func() []int { return proctest.Find(fmt.Sprintf("moat-gvisor-reap %d", c.Process.Pid)) }
	if left := proctest.Gone(reaper, 5*time.Second); len(left) > 0 {
		t.Errorf("the dead caller's reaper is still running: %v", left)
	}
}

// TestReaperRestarted: a reaper that was killed is replaced at the next
// container (or, in a short window, the one after), so that a moat whose
// reaper died is still cleaned up after. The control: the first run has a
// reaper to kill.
func TestReaperRestarted(t *testing.T) {
	be := &gvisor.Backend{Runsc: usable(t)}
	ws := backendtest.Workspace(t)
	reapers := func() []int { return proctest.Find(fmt.Sprintf("moat-gvisor-reap %d", os.Getpid())) }
	run := func() {
		t.Helper()
		if st, err := be.Run(context.Background(), backendtest.BaseSpec(ws, "/bin/true"), backend.Stdio{}); err != nil || st.ExitCode != 0 {
			t.Fatalf("run: %+v %v", st, err)
		}
	}
	run()
	first := reapers()
	if len(first) != 1 {
		t.Fatalf("control: this process's reapers: %v, want one", first)
	}
	syscall.Kill(first[0], syscall.SIGKILL)
	// Until it has exited its end of the pipe is open, and the next run's
	// write to it succeeds: its command line reads empty before then.
	if !proctest.Exited(first[0], 5*time.Second) {
		t.Fatalf("the killed reaper %d is still there", first[0])
	}
	// The run that finds the reaper gone (its write to the pipe fails)
	// starts another. About once in 30 runs the write still succeeded
	// just after the reaper had exited, some other copy of the pipe's
	// read end not yet closed (which process held it was not found: a
	// look through /proc slowed the run enough that it never showed);
	// the run after it then found the reaper gone.
	var again []int
	for i := 0; i < 3 && len(again) == 0; i++ {
		run()
		again = reapers()
	}
	if len(again) != 1 || again[0] == first[0] {
		t.Errorf("after the reaper was killed and three runs made: reapers %v, want a new one", again)
	}
}

// TestSessionProtectionReplacedOnHost: in a session, a protected file the
// host replaces (a rename over it) ends the sandbox: the command running
// then ends with reason protection, naming the path, and the instance
// says why it ended. The control: a command before the replace cannot
// write the file.
func TestSessionProtectionReplacedOnHost(t *testing.T) {
	runsc := usable(t)
	ws := backendtest.Workspace(t)
	p := filepath.Join(ws, ".envrc")
	os.WriteFile(p, []byte("old\n"), 0o644)
	os.Chown(p, 1000, 1000)
	spec := backendtest.BaseSpec(ws)
	spec.Mounts = append(spec.Mounts, backend.Mount{Kind: backend.MountReadOnly, Target: p})
	in, err := (&gvisor.Backend{Runsc: runsc}).Create(context.Background(), spec, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Destroy(context.Background())
	exec := func(script string) (*backend.ExitStatus, string) {
		var out strings.Builder
		proc, err := in.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"/bin/sh", "-c", script}, Env: spec.Env, Dir: ws}, backend.Stdio{Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatal(err)
		}
		st, err := proc.Wait()
		if err != nil {
			t.Fatal(err)
		}
		return st, out.String()
	}
	if st, out := exec(`echo evil >> .envrc 2>/dev/null && echo WROTE; echo went-on`); st.Cause != backend.CauseExit || strings.Contains(out, "WROTE") {
		t.Fatalf("control: %+v %q", st, out)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		os.WriteFile(p+".new", []byte("new\n"), 0o644)
		os.Chown(p+".new", 1000, 1000)
		os.Rename(p+".new", p)
	}()
	st, out := exec(`sleep 10; echo evil >> .envrc && echo WROTE`)
	named := false
	for _, d := range st.Denials {
		named = named || d.Layer == backend.LayerMount && d.What == p
	}
	if st.Cause != backend.CauseProtection || !named || strings.Contains(out, "WROTE") {
		t.Errorf("replaced on the host: %+v %q", st, out)
	}
	select {
	case <-in.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the sandbox did not end")
	}
	if r, ok := in.(interface{ EndReason() string }); !ok || !strings.Contains(r.EndReason(), p) {
		t.Errorf("the instance does not say why it ended")
	}
}
