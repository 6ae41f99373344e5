package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAuditFullRefusesRuled: when --audit's file cannot take a record (its
// file-size limit here; a full disk alike), moat says so at once, and a
// command line a rule decided is refused rather than run unrecorded; the
// file still verifies, with its earlier records. The control: the same
// run with room for the record runs the command and records it.
func TestAuditFullRefusesRuled(t *testing.T) {
	ws := t.TempDir()
	pol := writePolicy(t, t.TempDir(), `
[[rules]]
name = "echo ok"
match = { command = ["echo"] }
decision = "allow"
`)
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	// A long argument makes the decision's record longer than the room
	// left under the limit (which the shell sets in blocks of 512 bytes).
	arg := strings.Repeat("x", 2000)
	run := func(limit int64) (int, string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", `ulimit -f "$1"; shift; exec "$@"`, "sh", strconv.FormatInt(limit, 10),
			os.Args[0], "run", "--policy", pol, "--workspace", ws, "--audit", auditFile, "--", "sh", "-c", "echo $0 > marker", arg)
		cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	if code, out := run(1 << 20); code != 0 {
		t.Fatalf("control run = %d %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "marker")); err != nil {
		t.Fatalf("control run: the command did not run: %v", err)
	}
	recs := readAudit(t, auditFile)
	if len(recs) != 2 || recs[0]["type"] != "decision" || recs[0]["rule"] == nil {
		t.Fatalf("control run's records: %v", recs)
	}
	os.Remove(filepath.Join(ws, "marker"))

	fi, err := os.Stat(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	code, out := run(fi.Size()/512 + 1)
	if code != exitMoatError ||
		!strings.Contains(out, "moat: --audit "+auditFile+": write audit stream: ") ||
		!strings.Contains(out, "file too large: the records after it are lost") ||
		!strings.Contains(out, "refused because its record could not be written to the audit stream") {
		t.Errorf("run with no room for its record = %d %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "marker")); err == nil {
		t.Error("the command whose decision went unrecorded ran")
	}
	if recs := readAudit(t, auditFile); len(recs) != 2 {
		t.Errorf("records after the failed run: %v", recs)
	}
}
