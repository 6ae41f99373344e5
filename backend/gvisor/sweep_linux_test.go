package gvisor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/moatbox/moat/internal/cgroup"
)

// TestSweepRemovesDeadRunsOnly: the directory of a run whose moat is
// gone is removed at the next run; that of a live moat (this test) stays.
func TestSweepRemovesDeadRunsOnly(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	c := exec.Command("/bin/true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(tmp, fmt.Sprintf("moat-gvisor-%d-1", c.Process.Pid))
	live := filepath.Join(tmp, fmt.Sprintf("moat-gvisor-%d-2", os.Getpid()))
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(filepath.Join(d, "state"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sweep("")
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("%s was left", dead)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("positive control: a live run's directory was removed: %v", err)
	}
}

// TestSweepLeavesOthersDirs: the temporary directory is shared, so a
// directory named like a dead run's that another user made, whose cgroup
// file names a cgroup of someone else's, is left, with that cgroup and
// its process. The positive control: the same directory made by this user
// is reaped, its cgroup killed and removed.
func TestSweepLeavesOthersDirs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a directory of another user's needs root")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	c := exec.Command("/bin/true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	runDir := func(n int, owner int, cg *cgroup.Cgroup) string {
		d := filepath.Join(tmp, fmt.Sprintf("moat-gvisor-%d-%d", c.Process.Pid, n))
		if err := os.MkdirAll(filepath.Join(d, "state"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := writeCgroupFile(d, cg); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, owner, owner); err != nil {
			t.Fatal(err)
		}
		return d
	}
	theirs, their := sleeperCgroup(t, "theirs")
	mine, my := sleeperCgroup(t, "mine")
	foreign := runDir(1, 65534, theirs)
	own := runDir(2, 0, mine)
	sweep("")
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("another user's directory was removed: %v", err)
	}
	for _, d := range theirs.Dirs() {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the cgroup another user's directory names was removed: %v", err)
		}
	}
	select {
	case <-their:
		t.Error("the process of the cgroup another user's directory names was killed")
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := os.Stat(own); !os.IsNotExist(err) {
		t.Errorf("positive control: this user's dead run's directory is left: %v", err)
	}
	for _, d := range mine.Dirs() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("positive control: its cgroup %s is left: %v", d, err)
		}
	}
	select {
	case <-my:
	case <-time.After(5 * time.Second):
		t.Error("positive control: the process in its cgroup was not killed")
	}
}

// sleeperCgroup makes a cgroup named like a sandbox's with a process in
// it, both ended with the test, and returns it with what is closed once
// the process has exited.
func sleeperCgroup(t *testing.T, name string) (*cgroup.Cgroup, <-chan struct{}) {
	t.Helper()
	cg, err := cgroup.New(fmt.Sprintf("moat-gvtest-%d-%s", os.Getpid(), name), cgroup.Limits{Pids: 64})
	if err != nil {
		t.Skipf("no cgroup with a pids limit here: %v", err)
	}
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		cg.Destroy()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done; cg.Destroy() })
	if err := cg.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	return cg, done
}
