//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestValidHeadLooksOnce: HEAD swapped between the look that finds it and
// its read (the workspace's owner, or a command in a direct-mode
// workspace, may swap it) is judged as what was read, once: a valid HEAD
// swapped for another valid one (a file for a link into refs/, or back)
// still makes a git directory, as git would find it either way; one
// swapped for an invalid link or a pipe does not, and the pipe does not
// hang the read. The control: unswapped, each is judged as git judges it.
func TestValidHeadLooksOnce(t *testing.T) {
	file := func(p string) error { return os.WriteFile(p, []byte("ref: refs/heads/main\n"), 0o644) }
	link := func(target string) func(string) error {
		return func(p string) error { return os.Symlink(target, p) }
	}
	fifo := func(p string) error { return syscall.Mkfifo(p, 0o644) }
	for _, tc := range []struct {
		name        string
		before, now func(string) error
		want        bool
	}{
		{"control: a file", file, nil, true},
		{"control: a link into refs", link("refs/heads/main"), nil, true},
		{"a file swapped for a link into refs", file, link("refs/heads/main"), true},
		{"a link into refs swapped for a file", link("refs/heads/main"), file, true},
		{"a file swapped for a link elsewhere", file, link("heads/main"), false},
		{"a file swapped for a pipe", file, fifo, false},
	} {
		dir := filepath.Join(t.TempDir(), "d")
		tree(t, dir, map[string]string{"objects/": "", "refs/": ""})
		head := filepath.Join(dir, "HEAD")
		if err := tc.before(head); err != nil {
			t.Fatal(err)
		}
		swapped := false
		testHookHeadLooked = func(p string) {
			if tc.now == nil || p != head {
				return
			}
			swapped = true
			tmp := filepath.Join(dir, "HEAD.new")
			if err := tc.now(tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, head); err != nil {
				t.Fatal(err)
			}
		}
		got := isGitDirAt(dir)
		testHookHeadLooked = nil
		if got != tc.want {
			t.Errorf("%s: isGitDirAt = %v, want %v", tc.name, got, tc.want)
		}
		if tc.now != nil && !swapped {
			t.Errorf("%s: HEAD was never looked at", tc.name)
		}
	}
}
