package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDeepChangeSet: a change set holding directories nested deeper than
// a path can name lists the deepest one it can read as Deep, reviews and
// applies its other changes by name, refuses a whole apply naming the
// deep directory, and is discarded whole (found by a tester: every diff,
// apply and discard of such a set failed, the discard leaving it on the
// disk, and its size was shown as a hundredth of what it held). The control: the change beside it is listed, shown and applied.
func TestDeepChangeSet(t *testing.T) {
	root := t.TempDir()
	tree(t, filepath.Join(root, "ws"), map[string]string{"a.txt": "one\n"})
	c, err := (&Store{Dir: filepath.Join(root, "state")}).Create(filepath.Join(root, "ws"), "")
	if err != nil {
		t.Fatal(err)
	}
	up := c.UpperDir()
	tree(t, up, map[string]string{"a.txt": "one\ntwo\n"})
	fd, err := unix.Open(up, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("e", 200)
	for i := 0; i < 100; i++ {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		fd = next
	}
	unix.Close(fd)

	// Counted whole: each of the directories holds a block at least.
	if n, err := DirSize(up); err != nil || n < 100*512 {
		t.Errorf("DirSize = %d, %.300v; want the hundred directories counted", n, err)
	}
	changes, err := c.Changes()
	if err != nil {
		t.Fatalf("changes: %.300v", err)
	}
	deep, other := 0, false
	for _, ch := range changes {
		if ch.Deep {
			deep++
		}
		other = other || ch.Path == "a.txt"
	}
	if deep != 1 || !other {
		t.Errorf("%d deep changes and a.txt listed: %v; want one, and a.txt", deep, other)
	}
	diff := render(t, c, Unified)
	if !strings.Contains(diff, "+two") || !strings.Contains(diff, "deeper than moat reads") {
		t.Errorf("the diff does not show a.txt's change and the deep directory:\n%.2000s", diff)
	}
	if _, err := c.Apply(nil, nil); !errors.Is(err, ErrTooDeep) {
		t.Errorf("a whole apply: %.300v, want ErrTooDeep", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "ws", "a.txt")); string(b) != "one\n" {
		t.Errorf("a refused apply wrote a.txt: %q", b)
	}
	if _, err := c.Apply([]string{"a.txt"}, nil); err != nil {
		t.Fatalf("apply of a.txt: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "ws", "a.txt")); string(b) != "one\ntwo\n" {
		t.Errorf("a.txt after its apply: %q", b)
	}
	if err := c.Discard(); err != nil {
		t.Fatalf("discard: %.300v", err)
	}
	left, _ := os.ReadDir(filepath.Join(root, "state", "runs"))
	if len(left) != 0 {
		t.Errorf("left after the discard: %v", left)
	}
}
