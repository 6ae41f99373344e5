package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestQuarantineErrorEscaped: when the quarantine cannot take what a
// direct-mode run planted (here, its state directory is full), the error
// that moat run prints names the planted path, whose name the command
// chose: an escape sequence in it must reach the terminal escaped, not
// as a sequence that repaints what is shown, and a line end in it must
// not start a line that reads as moat's own. The control: the error is
// printed, and names the path.
func TestQuarantineErrorEscaped(t *testing.T) {
	if syscall.Geteuid() != 0 {
		t.Skip("needs root to mount the test's file systems")
	}
	mount := func(size string) string {
		d := t.TempDir()
		if err := syscall.Mount("moat-test", d, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
			t.Skip("cannot mount a tmpfs:", err)
		}
		t.Cleanup(func() { syscall.Unmount(d, syscall.MNT_DETACH) })
		return d
	}
	// The workspace stays where the test's temporary directories are
	// (a tmpfs cannot be id-mapped before Linux 6.3, which a root run
	// needs); only the state directory is a small tmpfs.
	ws, state := t.TempDir(), mount("1m")
	t.Setenv("MOAT_STATE_DIR", filepath.Join(state, "s"))
	// A submodule git directory the run adds, with a name of its choice
	// and a config larger than the state directory can hold.
	script := `git init -q && d=.git/modules/$(printf 'evil\033[2Jname\nmoat: forged') && mkdir -p "$d" && cp .git/HEAD "$d/HEAD" && head -c 2000000 /dev/zero > "$d/config" && echo PLANTED`
	_, out, errs := moat(t, ws, "run", "--", "sh", "-c", script)
	if !strings.Contains(out, "PLANTED") {
		t.Fatalf("the command could not plant: %s%s", out, errs)
	}
	if !strings.Contains(errs, "quarantine") || !strings.Contains(errs, "evil") {
		t.Fatalf("control: no quarantine error naming the path: %q", errs)
	}
	if strings.ContainsRune(errs, '\033') {
		t.Errorf("moat run wrote an escape sequence the command chose to the terminal: %q", errs)
	}
	if strings.Contains(errs, "\nmoat: forged") {
		t.Errorf("a line end in the name the command chose started a line of moat's: %q", errs)
	}
}
