package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunCopyUnderDiskRefusedFirst: moat run --workspace-mode copy --disk
// is refused before the workspace is copied (one larger than the limit is
// not cut off as too large to copy), naming --allow-degraded, which moat
// run takes. Control: with --allow-degraded the same run copies the
// workspace and runs on it, saying so before the command starts.
func TestRunCopyUnderDiskRefusedFirst(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "big"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := moat(t, ws, "run", "--workspace-mode", "copy", "--disk", "2m", "--", "echo", "RAN")
	if code != exitMoatError || strings.Contains(out, "RAN") || strings.Contains(errs, "too large") ||
		!strings.Contains(errs, "--allow-degraded") || !strings.Contains(errs, "--workspace-mode overlay") {
		t.Errorf("code %d stdout %q stderr %q: want a refusal before the copy, naming --allow-degraded", code, out, errs)
	}
	code, out, errs = moat(t, ws, "run", "--workspace-mode", "copy", "--disk", "8m", "--allow-degraded", "--", "sh", "-c", "test -s big && echo COMMAND >&2")
	if code != 0 {
		t.Errorf("positive control, degraded: code %d stdout %q stderr %q", code, out, errs)
	}
	// What runs degraded is said before the command starts, and once (it
	// came after the command ended, found by a tester).
	warn := "moat: WARNING: running degraded: disk limit"
	if i, j := strings.Index(errs, warn), strings.Index(errs, "COMMAND"); i < 0 || j < 0 || i > j || strings.Count(errs, warn) != 1 {
		t.Errorf("stderr %q: want the degraded warning once, before the command's output", errs)
	}
}
