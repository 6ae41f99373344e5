package pipefd

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Only the pipe is anonymous: a regular file, a directory, a named FIFO
// and /dev/null are not. The pipe is passable to a command of another
// uid than the one that made it, not to one of its maker's uid (which
// could reopen it through /proc/self/fd/0 to write into it, found by a
// tester); /dev/null to any, the others to none.
func TestAnonymousAndPassable(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	me := os.Geteuid()
	if !Anonymous(r) || !Anonymous(w) || !Passable(r, me+1) || !Passable(r, -1) {
		t.Errorf("a pipe is not taken for one")
	}
	if Passable(r, me) || PassablePipe(w, me) {
		t.Errorf("a pipe is passable to a command of its maker's uid")
	}
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	for _, c := range []struct {
		path     string
		flag     int
		passable bool
	}{{file, os.O_RDONLY, false}, {dir, os.O_RDONLY, false}, {fifo, os.O_RDWR, false}, {os.DevNull, os.O_RDONLY, true}} {
		f, err := os.OpenFile(c.path, c.flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		if Anonymous(f) {
			t.Errorf("%s is taken for an anonymous pipe", c.path)
		}
		if Passable(f, me+1) != c.passable {
			t.Errorf("%s: passable %v, want %v", c.path, !c.passable, c.passable)
		}
		f.Close()
	}
}
