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
// workspace and runs on it.
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
	code, out, errs = moat(t, ws, "run", "--workspace-mode", "copy", "--disk", "8m", "--allow-degraded", "--", "test", "-s", "big")
	if code != 0 {
		t.Errorf("positive control, degraded: code %d stdout %q stderr %q", code, out, errs)
	}
}
