package overlay

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestCopyFile(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.WriteFile(src, []byte("content"), 0o644)
	if err := CopyFile(src, dst, 0o751, true); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dst)
	if b, _ := os.ReadFile(dst); err != nil || string(b) != "content" || fi.Mode().Perm() != 0o751 {
		t.Errorf("copy: %q, mode %v, %v", b, fi.Mode(), err)
	}
	// dst must be new: an existing file is never written through.
	if err := CopyFile(src, dst, 0o644, false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("copy over an existing file: %v, want ErrExist", err)
	}
}

// TestCopyFileNotRegular: a symlink at src is not followed, a FIFO not
// waited on; the regular file beside them is the control (TestCopyFile).
func TestCopyFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("content"), 0o644)
	os.Symlink(target, filepath.Join(dir, "link"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"link", "fifo"} {
		err := CopyFile(filepath.Join(dir, name), filepath.Join(dir, name+".copy"), 0o644, false)
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("copy %s: %v, want ErrNotRegular", name, err)
		}
	}
	if err := CopyFile(target, filepath.Join(dir, "target.copy"), 0o644, false); err != nil {
		t.Errorf("copy the regular file: %v", err)
	}
}
