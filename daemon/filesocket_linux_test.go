//go:build linux

package daemon

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestReadFileOfASocket: reading a unix socket through the files API is
// a bad request, as a FIFO is (it was an internal error: open(2) fails
// with ENXIO, found by a tester). The control: a file beside it reads.
func TestReadFileOfASocket(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(ws, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.WriteFile(filepath.Join(ws, "f"), []byte("x\n"), 0o644)
	m := newManager(t, Config{Engine: Sandboxes})
	s, err := m.Create(context.Background(), UIDTenant(os.Geteuid()), &CreateRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := s.ReadFile("f"); err != nil || string(b) != "x\n" {
		t.Fatalf("control: %q %v", b, err)
	}
	if _, err := s.ReadFile("s"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("a socket: %v, want a bad request", err)
	}
}
