package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxPath: a path through a link below the root, on its way or
// named with a trailing slash, is the path the link leads to, read in the
// root (an absolute target is the sandbox's, not the host's), a relative
// path from the working directory; a path that stops existing, or
// reaches a file, on its way ends there (nothing beyond it can be
// deleted), and a link named as the last component alone is the link (rm
// removes it). The controls: paths with no link on the way are as
// written, cleaned. A path that cannot be followed (into /proc, whose
// links mean what they mean to the process; a name too long, a loop) is
// written out from there and counts as through a link: the look fails
// closed.
func TestSandboxPath(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "tmp/d"), 0o755)
	os.MkdirAll(filepath.Join(root, "w/sub"), 0o755)
	os.WriteFile(filepath.Join(root, "tmp/f"), nil, 0o644)
	os.Symlink("/data", filepath.Join(root, "tmp/l"))
	os.Symlink("/data", filepath.Join(root, "w/l"))
	os.Symlink("sub", filepath.Join(root, "w/in"))
	os.Symlink("../tmp/l", filepath.Join(root, "w/up"))
	os.Symlink("loop", filepath.Join(root, "w/loop"))
	for _, tc := range []struct {
		w, want string
		linked  bool
	}{
		{"/tmp/l/x", "/data/x", true},
		{"/tmp/l/", "/data", true},
		{"/tmp/l/.", "/data", true},
		{"l/x", "/data/x", true},
		{"./up/x/y", "/data/x/y", true},
		{"in/x", "/w/sub/x", true},
		{"/tmp/l", "/tmp/l", false},
		{"l", "/w/l", false},
		{"/tmp/d/x", "/tmp/d/x", false},
		{"/tmp/no/x", "/tmp/no/x", false},
		{"/tmp/f/x", "/tmp/f/x", false},
		{"sub/../x", "/w/x", false},
		{"/tmp//d/./x", "/tmp/d/x", false},
	} {
		p, linked, err := sandboxPath(root, "/w", tc.w)
		if err != nil || p != tc.want || linked != tc.linked {
			t.Errorf("%s: %q linked %v (%v), want %q linked %v", tc.w, p, linked, err, tc.want, tc.linked)
		}
	}
	// What the walk cannot follow is the path written out from there, as
	// through a link: a link into /proc (whose self and descriptors mean
	// the process's), /proc itself, a name too long, a loop.
	os.MkdirAll(filepath.Join(root, "proc/self/fd"), 0o755)
	os.Symlink("/proc/self/fd/3", filepath.Join(root, "w/fd"))
	os.Symlink("/proc/self/cwd/../data", filepath.Join(root, "w/cwd"))
	long := "/tmp/" + strings.Repeat("n", 300) + "/x"
	for w, want := range map[string]string{
		"fd/a":           "/proc/self/fd/3/a",
		"cwd/a":          "/proc/self/data/a",
		"/proc/self/fd/": "/proc/self/fd",
		"/proc/1/root/x": "/proc/1/root/x",
		long:             long,
		"loop/x":         "/w/loop/x",
	} {
		p, linked, err := sandboxPath(root, "/w", w)
		if err != nil || p != want || !linked {
			t.Errorf("%s: %q linked %v (%v), want %q linked", w, p, linked, err, want)
		}
	}
	if _, _, err := sandboxPath(root, "", "l/x"); err == nil {
		t.Error("a relative path without a working directory: no error")
	}
	argv, linked, err := linksFollowed(root, "/w", []string{"rm", "-rf", "--", "l/x", "-n/x", "build"})
	if err != nil || !linked || strings.Join(argv, " ") != "rm -rf -- /data/x -n/x build" {
		t.Errorf("linksFollowed: %q %v %v", argv, linked, err)
	}
}
