//go:build linux

package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/moatbox/moat/internal/cgroup"
)

// TestReapCgroupsOnlyMoats: a dead daemon's record names its sandbox's
// cgroup, which the next daemon kills and removes however young it is; a
// record naming any other directory (a cgroup not named like a sandbox's,
// a directory that is not a cgroup) removes nothing and kills no one.
func TestReapCgroupsOnlyMoats(t *testing.T) {
	tag := fmt.Sprintf("reaptest-%d-%d", os.Getpid(), time.Now().UnixNano())
	lim := cgroup.Limits{Pids: 64}
	mine, err := cgroup.New(cgroupPrefix+tag, lim)
	if err != nil {
		t.Skipf("no cgroup with a pids limit for this user here: %v", err)
	}
	defer mine.Destroy()
	other, err := cgroup.New("other-"+tag, lim)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Destroy()
	// What a dead daemon's sandbox may leave in its cgroup, and a process
	// of someone else's.
	inMine, inOther := sleeper(t, mine), sleeper(t, other)
	notCgroup := filepath.Join(t.TempDir(), cgroupPrefix+"x")
	os.Mkdir(notCgroup, 0o700)

	state := t.TempDir()
	dir := filepath.Join(state, "daemon")
	os.MkdirAll(filepath.Join(dir, "sessions"), 0o700)
	records := map[string][]string{
		"aaaa": mine.Dirs(),
		"bbbb": other.Dirs(),
		"cccc": {notCgroup},
	}
	for id, dirs := range records {
		data, _ := json.Marshal(&record{ID: id, Cgroups: dirs})
		os.WriteFile(filepath.Join(dir, "sessions", id+".json"), data, 0o600)
	}
	// The positive control: both cgroups are there, each with its
	// process, before the reap.
	for _, d := range append(mine.Dirs(), other.Dirs()...) {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("control: %v", err)
		}
	}
	m, err := New(Config{StateDir: state, Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	if len(m.Reaped) != len(records) {
		t.Errorf("reaped %v, want every record", m.Reaped)
	}
	for _, d := range mine.Dirs() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("the recorded cgroup %s is left: %v", d, err)
		}
	}
	if !exited(inMine, 5*time.Second) {
		t.Error("the process in the recorded cgroup was not killed")
	}
	for _, d := range other.Dirs() {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("a cgroup not named like a sandbox's was removed: %v", err)
		}
	}
	if exited(inOther, 100*time.Millisecond) {
		t.Error("the process of a cgroup not named like a sandbox's was killed")
	}
	if _, err := os.Stat(notCgroup); err != nil {
		t.Errorf("a directory that is not a cgroup was removed: %v", err)
	}
}

// sleeper starts a process in c, killed at the end of the test, and
// returns what is closed once it has exited.
func sleeper(t *testing.T, c *cgroup.Cgroup) <-chan struct{} {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	if err := c.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	return done
}

// exited says whether done is closed within d.
func exited(done <-chan struct{}, d time.Duration) bool {
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestReapCgroupsOnlyFromPrivateDir: records in a sessions directory that
// others may write (made so before the daemon) may not be the daemon's:
// the cgroup they name is left. The positive control is
// TestReapCgroupsOnlyMoats, where the same record in the daemon's own
// directory has its cgroup removed.
func TestReapCgroupsOnlyFromPrivateDir(t *testing.T) {
	tag := fmt.Sprintf("reaptest-%d-%d", os.Getpid(), time.Now().UnixNano())
	cg, err := cgroup.New(cgroupPrefix+tag, cgroup.Limits{Pids: 64})
	if err != nil {
		t.Skipf("no cgroup with a pids limit for this user here: %v", err)
	}
	defer cg.Destroy()
	in := sleeper(t, cg)
	state := t.TempDir()
	sessions := filepath.Join(state, "daemon", "sessions")
	os.MkdirAll(sessions, 0o700)
	if err := os.Chmod(sessions, 0o777); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(&record{ID: "aaaa", Cgroups: cg.Dirs()})
	os.WriteFile(filepath.Join(sessions, "aaaa.json"), data, 0o600)
	m, err := New(Config{StateDir: state, Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	if len(m.Reaped) != 1 {
		t.Errorf("reaped %v, want the record", m.Reaped)
	}
	for _, d := range cg.Dirs() {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("a cgroup named by a record others could have written was removed: %v", err)
		}
	}
	if exited(in, 100*time.Millisecond) {
		t.Error("a record others could have written had a process killed")
	}
}
