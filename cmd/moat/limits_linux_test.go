package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runMoatChild runs this binary as moat in a process of its own, in ws,
// and returns its exit code, the report its --json printed (nil when
// none) and its stderr: the test then survives whatever happens to that
// moat.
func runMoatChild(t *testing.T, ws string, args ...string) (int, map[string]any, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"run", "--json"}, args...)...)
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
	cmd.Dir = ws
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode() // -1 when a signal ended moat itself
	} else if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	var rep map[string]any
	if json.Unmarshal([]byte(lines[len(lines)-1]), &rep) != nil {
		rep = nil
	}
	return code, rep, errb.String()
}

// TestMemoryLimitOnTmpfsKillsOnlyTheRun: a command that fills the
// sandbox's /tmp past its memory limit is killed and the run reported as
// "memory". The OOM killer picks the process with the most resident
// memory in the run's cgroup, which a tmpfs writer is not (its pages are
// in no process); when the sandbox's init shared moat's address space,
// that was init, and the kernel kills every process sharing a victim's
// memory: moat itself died, with no report. The control: the same file
// under a limit it fits in.
func TestMemoryLimitOnTmpfsKillsOnlyTheRun(t *testing.T) {
	ws := t.TempDir()
	fill := "head -c 100M /dev/zero > /tmp/big && echo filled"
	code, rep, errs := runMoatChild(t, ws, "--memory", "512M", "--", "sh", "-c", fill)
	if code != 0 || rep == nil || rep["reason"] != "exit" {
		t.Skipf("no memory limit for a moat started by this test (control: code %d, report %v): %s", code, rep, errs)
	}
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		code, rep, errs = runMoatChild(t, ws, "--memory", "48M", "--", "sh", "-c", strings.ReplaceAll(fill, "/tmp", dir))
		if rep == nil {
			t.Errorf("%s: moat ended with code %d and no report: %s", dir, code, errs)
			continue
		}
		if rep["reason"] != "memory" || code != 137 {
			t.Errorf("%s: code %d, reason %v, want 137 and memory: %s", dir, code, rep["reason"], errs)
		}
	}
}
