package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestNotFoundNamesReadOnlyList: a policy whose read_only lists only its
// own paths (it replaces the default list) shows no system programs, and
// its every command was "not found" without a word why; the error now
// says that read_only does not list /usr. The control: a missing program
// under the default list is not found with no such hint.
func TestNotFoundNamesReadOnlyList(t *testing.T) {
	for _, tc := range []struct {
		readOnly []string
		args     []string
		hint     bool
	}{
		{[]string{t.TempDir()}, []string{"sh", "-c", "true"}, true},
		{nil, []string{"no-such-program-here"}, false},
	} {
		p := execPolicy(t, t.TempDir(), "")
		if tc.readOnly != nil {
			p.Filesystem.ReadOnly = tc.readOnly
		}
		rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: tc.args}, backend.Stdio{})
		if err == nil || !errors.Is(err, backend.ErrNotFound) || rep.ExitCode != 127 {
			t.Fatalf("%v under read_only %v: %v (exit %d), want not found", tc.args, tc.readOnly, err, rep.ExitCode)
		}
		if got := strings.Contains(err.Error(), "does not list /usr"); got != tc.hint || rep.Error != err.Error() {
			t.Errorf("%v under read_only %v: %v (report: %q), want the read_only hint %v", tc.args, tc.readOnly, err, rep.Error, tc.hint)
		}
	}
}
