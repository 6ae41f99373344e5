package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// TestResolveOutsideProc: a workspace path that passes through /proc,
// by its name or by a link (/dev/fd/N, a link a tenant made), is refused
// as one that does not resolve: resolved on the daemon's thread, it told a
// tenant what the daemon's fds lead to (found by a tester). The controls:
// paths through ordinary links, .. after a link included, resolve as
// filepath.EvalSymlinks resolves them.
func TestResolveOutsideProc(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "a", "b", "c"), 0o755)
	os.Symlink("a/b", filepath.Join(dir, "ab"))
	os.Symlink(filepath.Join(dir, "a", "b", "c"), filepath.Join(dir, "abs"))
	os.Symlink("/proc/self/cwd", filepath.Join(dir, "self"))
	os.Symlink("/dev/fd/0", filepath.Join(dir, "fd"))
	for _, p := range []string{"/proc/self/fd/0", "/proc/self/cwd", "/proc", "/dev/fd/0", filepath.Join(dir, "self"), filepath.Join(dir, "fd"), "/proc/../proc/self"} {
		if got, err := resolveOutsideProc(p); err == nil {
			t.Errorf("%s resolved to %s, want a refusal", p, got)
		}
	}
	for _, p := range []string{filepath.Join(dir, "ab", "c"), filepath.Join(dir, "ab", ".."), filepath.Join(dir, "abs", "..", ".."), dir, "/"} {
		want, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := resolveOutsideProc(p); err != nil || got != want {
			t.Errorf("control: %s = %q %v, want %q", p, got, err, want)
		}
	}
}
