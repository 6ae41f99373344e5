package workspace

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCopySwapped replaces a workspace file, between the walk of
// CreateCopy and its copy of the file, with a symlink to a file only root
// may read, or with a FIFO: what a command writing the same workspace
// directly (another session's, or the tenant itself) can do while a
// copy-mode session starts. As root the copy must not follow the link
// (it would hand the secret to the workspace's owner, whose uid the copy
// keeps) nor wait on the FIFO. The control copies the same file when
// nothing swaps it.
func TestCopySwapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the copy keeps owners as root only")
	}
	root := t.TempDir()
	os.Chmod(root, 0o755)
	secret := filepath.Join(root, "secret")
	if err := os.WriteFile(secret, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, swap := range []string{"none", "symlink", "fifo"} {
		t.Run(swap, func(t *testing.T) {
			ws := filepath.Join(root, "ws-"+swap)
			tree(t, ws, map[string]string{"f": "mine\n", "g": "other\n"})
			for _, p := range []string{ws, filepath.Join(ws, "f"), filepath.Join(ws, "g")} {
				os.Lchown(p, 1000, 1000)
			}
			testHookCopyFile = func(dst string) {
				if filepath.Base(dst) != "f" {
					return
				}
				f := filepath.Join(ws, "f")
				switch swap {
				case "symlink":
					os.Remove(f)
					os.Symlink(secret, f)
				case "fifo":
					os.Remove(f)
					unix.Mkfifo(f, 0o644)
				}
			}
			defer func() { testHookCopyFile = nil }()
			type result struct {
				c   *ChangeSet
				err error
			}
			done := make(chan result, 1)
			s := &Store{Dir: filepath.Join(root, "state-"+swap)}
			go func() {
				c, err := s.CreateCopy(context.Background(), ws, "", 0)
				done <- result{c, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				// Let the copy go, so the test ends.
				if fd, err := unix.Open(filepath.Join(ws, "f"), unix.O_RDWR|unix.O_NONBLOCK, 0); err == nil {
					unix.Close(fd)
				}
				r = <-done
				t.Errorf("CreateCopy waited on a FIFO swapped in")
			}
			if r.err != nil {
				t.Fatalf("CreateCopy: %v", r.err)
			}
			defer r.c.Discard()
			up := r.c.UpperDir()
			if b, err := os.ReadFile(filepath.Join(up, "g")); err != nil || string(b) != "other\n" {
				t.Errorf("g copied as %q, %v", b, err)
			}
			b, err := os.ReadFile(filepath.Join(up, "f"))
			var st syscall.Stat_t
			switch swap {
			case "none":
				if syscall.Lstat(filepath.Join(up, "f"), &st); err != nil || string(b) != "mine\n" || st.Uid != 1000 {
					t.Errorf("control: f copied as %q (uid %d), %v", b, st.Uid, err)
				}
			default:
				if bytes.Contains(b, []byte("root only")) {
					t.Errorf("the copy followed a symlink swapped in: f holds %q", b)
				}
				if syscall.Lstat(filepath.Join(up, "f"), &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
					t.Errorf("a %s swapped in was copied as a regular file", swap)
				}
			}
		})
	}
}
