package overlay

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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
