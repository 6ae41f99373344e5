package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWriteTarQuotesNames: moat cp of a host directory warns about each
// special file it leaves out, by name; in a direct workspace the name is
// a sandboxed command's, and an escape sequence in it must reach the
// terminal quoted. The control: the warning is printed and names it.
func TestWriteTarQuotesNames(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "evil\033[2Jname"), 0o644); err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	if err := writeTar(io.Discard, dir, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errb.String(), "left out") || !strings.Contains(errb.String(), "evil") {
		t.Fatalf("control: no warning naming the FIFO: %q", errb.String())
	}
	if strings.ContainsRune(errb.String(), '\033') {
		t.Errorf("moat cp wrote an escape sequence from a file name: %q", errb.String())
	}
}
