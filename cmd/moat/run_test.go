//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
