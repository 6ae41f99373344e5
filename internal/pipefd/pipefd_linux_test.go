package pipefd

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Only the pipe is one: a regular file, a directory, a named FIFO and
// /dev/null are not.
func TestAnonymous(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if !Anonymous(r) || !Anonymous(w) {
		t.Errorf("a pipe is not taken for one")
	}
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	for _, c := range []struct {
		path string
		flag int
	}{{file, os.O_RDONLY}, {dir, os.O_RDONLY}, {fifo, os.O_RDWR}, {os.DevNull, os.O_RDONLY}} {
		f, err := os.OpenFile(c.path, c.flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		if Anonymous(f) {
			t.Errorf("%s is taken for an anonymous pipe", c.path)
		}
		f.Close()
	}
}

// Passable: a pipe and the null device are; a regular file, a directory
// and a named FIFO are not.
func TestPassable(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if !Passable(r) || !Passable(null) {
		t.Errorf("a pipe or /dev/null is not passable")
	}
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	for _, c := range []struct {
		path string
		flag int
	}{{file, os.O_RDONLY}, {dir, os.O_RDONLY}, {fifo, os.O_RDWR}} {
		f, err := os.OpenFile(c.path, c.flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		if Passable(f) {
			t.Errorf("%s is passable", c.path)
		}
		f.Close()
	}
}
