package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunTimePolicyErrorsLocated: a policy value found wrong only when
// the run uses it (a workspace that does not exist, a secret's source
// that gives nothing) is named by the policy's file, line and field, as a
// value Validate refuses is; the control: the same workspace given by the
// flag is named by the flag.
func TestRunTimePolicyErrorsLocated(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "missing")
	w := filepath.Join(dir, "w.toml")
	os.WriteFile(w, []byte("[workspace]\npath = \""+ws+"\"\n"), 0o644)
	if code, _, errs := moat(t, dir, "run", "--policy", w, "--", "true"); code != exitMoatError || !strings.Contains(errs, "w.toml:2: workspace.path: ") {
		t.Errorf("a missing workspace of the policy: %d %q", code, errs)
	}
	if code, _, errs := moat(t, dir, "run", "--workspace", ws, "--", "true"); code != exitMoatError || !strings.Contains(errs, "flag --workspace: workspace.path: ") {
		t.Errorf("a missing workspace of the flag: %d %q", code, errs)
	}
	s := filepath.Join(dir, "s.toml")
	os.WriteFile(s, []byte("[network]\nmode = \"allow\"\nallow = [\"example.com\"]\n\n[[secrets]]\nname = \"T\"\nsource = \"env:MOAT_TEST_NEVER_SET\"\nhosts = [\"example.com\"]\n"), 0o644)
	if code, _, errs := moat(t, dir, "run", "--policy", s, "--", "true"); code != exitMoatError || !strings.Contains(errs, "s.toml:7: secrets[0].source: T: the environment variable MOAT_TEST_NEVER_SET is not set") {
		t.Errorf("a secret's source that gives nothing: %d %q", code, errs)
	}
}
