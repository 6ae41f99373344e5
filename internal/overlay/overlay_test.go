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

// TestCopyFileSparse: a file of a few data blocks and a huge size is
// copied with its data where it was and its holes left holes; a dense
// file of the same layout is the control for the content.
func TestCopyFileSparse(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "sparse")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	const size = 1 << 30
	f.WriteAt([]byte("head"), 0)
	f.WriteAt([]byte("middle"), size/2)
	f.WriteAt([]byte("tail"), size-4)
	f.Close()
	dst := filepath.Join(dir, "copy")
	if err := CopyFile(src, dst, 0o644, false); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dst, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.Blocks*512 > 8<<20 {
		t.Errorf("copy: size %d, %d bytes allocated, want %d and a few blocks", st.Size, st.Blocks*512, size)
	}
	c, _ := os.Open(dst)
	defer c.Close()
	for _, w := range []struct {
		off int64
		s   string
	}{{0, "head"}, {size / 2, "middle"}, {size - 4, "tail"}, {4096, "\x00\x00\x00\x00"}} {
		b := make([]byte, len(w.s))
		if _, err := c.ReadAt(b, w.off); err != nil || string(b) != w.s {
			t.Errorf("at %d: %q, %v, want %q", w.off, b, err, w.s)
		}
	}
	// The control: a small dense file comes whole.
	dense := filepath.Join(dir, "dense")
	os.WriteFile(dense, []byte("all of it\n"), 0o644)
	if err := CopyFile(dense, dense+".copy", 0o644, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dense + ".copy"); string(b) != "all of it\n" {
		t.Errorf("dense copy %q", b)
	}
}
