//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecRulesInSession: a program a session's script starts is checked
// by the rules: `moat exec` says which the rules refused, and
// `moat serve --audit` records it in a stream `moat audit verify`
// accepts. Positive control: the same program with other arguments runs.
func TestExecRulesInSession(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	sock, _ := startServe(t, "--audit", audit)
	id := policySession(t, dir, sock, "[[rules]]\nname = \"no-nodename\"\nmatch = { command = [\"uname\", \"-n\"] }\ndecision = \"deny\"\nreason = \"the node name stays inside\"\n")
	if code, _, errs := moat(t, dir, "exec", "--socket", sock, id, "--", "sh", "-c", `printf 'uname -n\nuname -s >/dev/null; echo "uname -s: $?"\n' > run.sh`); code != 0 {
		t.Fatalf("write the script: %d %q", code, errs)
	}
	code, out, errs := moat(t, dir, "exec", "--socket", sock, id, "--", "sh", "run.sh")
	if code != 0 || out != "uname -s: 0\n" || !strings.Contains(errs, "the rules refused to start: uname -n ×1 (no-nodename") {
		t.Errorf("exec: %d %q %q", code, out, errs)
	}
	code, out, errs = moat(t, dir, "audit", "verify", audit)
	// The daemon's start, the session's, the decision, the run records.
	if code != 0 || !strings.Contains(out, " records, chain intact") {
		t.Errorf("audit verify: %d %q %q", code, out, errs)
	}
	if b, _ := os.ReadFile(audit); !strings.Contains(string(b), `"at":"exec"`) || !strings.Contains(string(b), "no-nodename") {
		t.Errorf("audit stream: %s", b)
	}
}
