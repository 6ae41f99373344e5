package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadBoundedFIFO: moat cp reads a host file to send it to a
// session; a FIFO a direct session's command left where the file was
// must be refused at once, not waited on forever. The control: a regular
// file beside it is read.
func TestReadBoundedFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "f")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := readBounded(fifo, 1<<20); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a FIFO: %v, want not a regular file", err)
		}
	case <-time.After(5 * time.Second):
		// Let the read go, so the test ends.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		<-done
		t.Errorf("readBounded waited on a FIFO")
	}
	reg := filepath.Join(dir, "r")
	os.WriteFile(reg, []byte("data"), 0o644)
	if b, err := readBounded(reg, 1<<20); err != nil || string(b) != "data" {
		t.Errorf("control: %q, %v", b, err)
	}
}
