package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRemoveTreeDeep: a tree far deeper than a path can name, and deeper
// than the descriptors a process may hold, some of its directories
// read-only, is removed whole (found by a tester: a change set of 58,000
// nested directories could not be discarded, too many open files, and was
// left on the disk). The control: the same tree defeats os.RemoveAll
// under the same limit of descriptors.
func TestRemoveTreeDeep(t *testing.T) {
	build := func() string {
		dir := filepath.Join(t.TempDir(), "tree")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.Repeat("d", 200)
		for i := 0; i < 600; i++ {
			if err := unix.Mkdirat(fd, name, 0o755); err != nil {
				t.Fatal(err)
			}
			if i%50 == 0 {
				f, err := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY, 0o444)
				if err != nil {
					t.Fatal(err)
				}
				unix.Close(f)
			}
			next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if i%100 == 7 {
				unix.Fchmod(fd, 0o500) // its entries cannot be removed as it is
			}
			unix.Close(fd)
			fd = next
		}
		unix.Close(fd)
		return dir
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	limit := func(n uint64) {
		l := old
		l.Cur = n
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			t.Fatal(err)
		}
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)

	control := build()
	limit(200)
	err := os.RemoveAll(control)
	limit(old.Cur)
	if err == nil {
		t.Fatal("control: os.RemoveAll removed the deep tree under the limit")
	}
	RemoveTree(control) // what the control left

	dir := build()
	limit(200)
	err = RemoveTree(dir)
	limit(old.Cur)
	if err != nil {
		t.Fatalf("RemoveTree: %.300v", err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the tree stays: %v", err)
	}
}
