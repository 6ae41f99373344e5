package inputfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadOpensOnlyRegularFiles: what is not a regular file is refused
// without being opened, since opening a device can act (a watchdog, a
// tape) and a link in a workspace can name any: a named pipe's blocked
// writer, which any open for reading releases, stays blocked. Opening the
// pipe for reading releases it (positive control).
func TestReadOpensOnlyRegularFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{})
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		close(opened)
	}()
	time.Sleep(100 * time.Millisecond) // the writer is blocked in open
	if _, err := Read(fifo, "git config", 100); err == nil {
		t.Fatal("a named pipe was read")
	}
	select {
	case <-opened:
		t.Error("Read opened the named pipe")
	case <-time.After(300 * time.Millisecond):
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	select {
	case <-opened:
	case <-time.After(5 * time.Second):
		t.Fatal("the writer is still blocked after a reader opened the pipe")
	}
}

// TestReadNoFollow: a link at the path is refused, not followed, so that
// a file read as root in a directory another user writes cannot be one
// that user cannot read. The control: the file the link names is read,
// and Read follows the link.
func TestReadNoFollow(t *testing.T) {
	dir := t.TempDir()
	file, link := filepath.Join(dir, "file"), filepath.Join(dir, "link")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadNoFollow(link, "test file", 10); err == nil {
		t.Errorf("ReadNoFollow followed the link: read %q", b)
	}
	if b, err := ReadNoFollow(file, "test file", 10); err != nil || string(b) != "x" {
		t.Errorf("control: ReadNoFollow(file) = %q, %v", b, err)
	}
	if b, err := Read(link, "test file", 10); err != nil || string(b) != "x" {
		t.Errorf("control: Read(link) = %q, %v", b, err)
	}
}

// TestKernelFilesRefused: a regular file of procfs or sysfs is refused
// before it is read (--policy /proc/kmsg waited for ever, unkillable by
// the signals moat relays, found by a tester). The control: a regular file
// elsewhere reads.
func TestKernelFilesRefused(t *testing.T) {
	for _, p := range []string{"/proc/self/status", "/sys/kernel/mm/transparent_hugepage/enabled"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if _, err := Read(p, "policy file", 1<<20); err == nil || !strings.Contains(err.Error(), "a file of the kernel's") {
			t.Errorf("%s: %v, want a refusal", p, err)
		}
	}
	ok := filepath.Join(t.TempDir(), "p.toml")
	os.WriteFile(ok, []byte("x"), 0o644)
	if b, err := Read(ok, "policy file", 1<<20); err != nil || string(b) != "x" {
		t.Errorf("control: %q %v", b, err)
	}
}
