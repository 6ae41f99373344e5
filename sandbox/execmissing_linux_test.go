package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
)

// TestExecCheckTellsNoHostPath: whether a program exists is looked up
// in the sandbox's view, never the host's: a link in the workspace to a
// host path outside the sandbox, run under a name the rules deny, is
// refused the same way whether that host path exists or not (no answer
// tells which). Positive control: the denied name as a real program is
// refused (126), a missing one run by the same path is not found (127).
func TestExecCheckTellsNoHostPath(t *testing.T) {
	ws, host := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "there"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, to := range map[string]string{"there": filepath.Join(host, "there"), "absent": filepath.Join(host, "absent")} {
		if err := os.Symlink(to, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	script := `for f in ./there ./absent /usr/bin/uname ./nothing; do perl -e 'exec {$ARGV[0]} "uname", "-n" or exit($!{ENOENT} ? 127 : 126)' $f >/dev/null 2>&1; printf '%s ' $?; done`
	if err := os.WriteFile(filepath.Join(ws, "probe.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	p := execPolicy(t, ws, execRules)
	var out, errb bytes.Buffer
	_, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p,
		Args: []string{"bash", "probe.sh"}},
		backend.Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	if got, want := out.String(), "126 126 126 127 "; got != want {
		t.Errorf("exit statuses %q, want %q (the first two tell whether a host path exists when they differ)", got, want)
	}
}
