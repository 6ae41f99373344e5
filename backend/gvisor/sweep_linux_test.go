package gvisor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
