//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFailedOverlayRunLeavesNoChangeSet: a run that fails before its
// command ran removes the change set it created, a new session's too,
// but never a session that earlier runs filled.
func TestFailedOverlayRunLeavesNoChangeSet(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state)
	ws := t.TempDir()
	// Compile fails (no such profile), after the change set was made; a
	// missing --ro path fails in the sandbox's mount stage.
	for _, bad := range [][]string{{"--seccomp", "/no/such/profile.json"}, {"--rw", "/no/such/dir"}} {
		for _, session := range []string{"", "fresh"} {
			args := append([]string{"run", "--workspace-mode", "overlay"}, bad...)
			if session != "" {
				args = append(args, "--session", session)
			}
			code, out, errs := moat(t, ws, append(args, "--", "echo", "RAN")...)
			if code != exitMoatError || strings.Contains(out, "RAN") {
				t.Fatalf("%v: code %d out %q err %q, want a failed run", args, code, out, errs)
			}
			if sets := changeSets(t, state); len(sets) != 0 {
				t.Errorf("%v: change sets left behind: %v", args, sets)
			}
		}
	}
	// A session with an earlier run keeps its change set.
	if code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--session", "kept", "--", "sh", "-c", "echo x > new"); code != 0 {
		t.Fatalf("first run of the session: %d %s", code, errs)
	}
	if code, _, _ := moat(t, ws, "run", "--workspace-mode", "overlay", "--session", "kept", "--seccomp", "/no/such/profile.json", "--", "true"); code != exitMoatError {
		t.Fatalf("failing run of the session: code %d", code)
	}
	if sets := changeSets(t, state); len(sets) != 1 {
		t.Errorf("the session's change set: %v, want it kept", sets)
	}
	if _, err := os.Stat(filepath.Join(ws, "new")); err == nil {
		t.Errorf("the overlay run wrote to the real workspace")
	}
}

// TestRoundingDurationFlags: a limit that rounds to zero would be no
// limit at all; the flag is refused, naming it.
func TestRoundingDurationFlags(t *testing.T) {
	ws := t.TempDir()
	for _, flag := range []string{"--wall", "--cpu-time"} {
		code, out, errs := moat(t, ws, "run", flag, "0.4ns", "--", "echo", "RAN")
		if code != exitMoatError || strings.Contains(out, "RAN") || !strings.Contains(errs, "flag "+flag) || !strings.Contains(errs, "rounds to zero") {
			t.Errorf("%s 0.4ns: code %d out %q err %q", flag, code, out, errs)
		}
	}
	if code, _, errs := moat(t, ws, "run", "--wall", "1ns", "--", "true"); code == exitMoatError && strings.Contains(errs, "--wall") {
		t.Errorf("--wall 1ns refused: %s", errs)
	}
}

// TestRWRootRefused: --rw / is refused as --workspace / is, and --ro and
// --rw of a single file work.
func TestRWRootRefused(t *testing.T) {
	ws := t.TempDir()
	code, out, errs := moat(t, ws, "run", "--rw", "/", "--", "echo", "RAN")
	if code != exitMoatError || strings.Contains(out, "RAN") || !strings.Contains(errs, "flag --rw: filesystem.read_write") {
		t.Errorf("--rw /: code %d out %q err %q", code, out, errs)
	}
	dir := t.TempDir()
	ro, rw := filepath.Join(dir, "ro.txt"), filepath.Join(dir, "rw.txt")
	os.WriteFile(ro, []byte("ro\n"), 0o644)
	os.WriteFile(rw, []byte("rw\n"), 0o666)
	code, out, errs = moat(t, ws, "run", "--ro", ro, "--rw", rw, "--", "sh", "-c", "cat "+ro+" "+rw+"; echo more >> "+rw)
	if code != 0 || out != "ro\nrw\n" {
		t.Errorf("--ro FILE --rw FILE: code %d out %q err %q", code, out, errs)
	}
	if b, _ := os.ReadFile(rw); string(b) != "rw\nmore\n" {
		t.Errorf("--rw FILE: the file holds %q", b)
	}
}

// TestEarlyInterruptReported: Ctrl-C or SIGTERM at any moment of a run,
// from the start of moat's main on, ends it with a report (reason killed)
// and an audit record. moat's handlers are in before it reads its policy;
// a signal before main, while Go's runtime starts, still ends moat as it
// would any Go program, so the test first waits for a sign of main: the
// "using policy" line of a workspace policy.
func TestEarlyInterruptReported(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, ".moat.toml"), []byte("[limits]\nwall = \"30s\"\n"), 0o644)
	if code, _, errs := moat(t, ws, "trust"); code != 0 {
		t.Fatalf("trust: %s", errs)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for _, delay := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 40 * time.Millisecond, 50 * time.Millisecond, 60 * time.Millisecond} {
			dir := t.TempDir()
			report, auditLog := filepath.Join(dir, "report.json"), filepath.Join(dir, "audit.jsonl")
			cmd := exec.Command(os.Args[0], "run", "--report", report, "--audit", auditLog, "--", "sleep", "5")
			cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
			cmd.Dir = ws
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stderr).ReadString('\n')
			if err != nil || !strings.Contains(line, "using policy") {
				cmd.Process.Kill()
				t.Fatalf("no policy line: %q %v", line, err)
			}
			time.Sleep(delay)
			start := time.Now()
			cmd.Process.Signal(sig)
			go io.Copy(io.Discard, stderr)
			cmd.Wait()
			what := fmt.Sprintf("%v after %v", sig, delay)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("%s: the run took %v to end", what, took)
			}
			var rep struct {
				Reason string  `json:"reason"`
				Error  string  `json:"error"`
				Signal *string `json:"signal"`
			}
			b, err := os.ReadFile(report)
			if err != nil || json.Unmarshal(b, &rep) != nil {
				t.Errorf("%s: no report: %v", what, err)
				continue
			}
			// Once forwarding has started the command gets the signal
			// and dies of it; before, the run is killed.
			forwarded := rep.Reason == "signal" && rep.Signal != nil && *rep.Signal == unix.SignalName(sig)
			if rep.Reason != "killed" && !forwarded {
				t.Errorf("%s: report %s, want reason killed (or the command dead of the forwarded signal)", what, b)
			}
			t.Logf("%s: reason %s %s", what, rep.Reason, rep.Error)
			var rec struct{ Type, Reason, RunID string }
			a, _ := os.ReadFile(auditLog)
			if json.Unmarshal(a, &rec) != nil || rec.Type != "run" || rec.Reason != rep.Reason {
				t.Errorf("%s: audit %q, want the run's record", what, a)
			}
		}
	}
}
