package inputfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(ok, []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, 101), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}

	if b, err := Read(ok, "policy file", 100); err != nil || string(b) != "x = 1\n" {
		t.Errorf("Read(regular) = %q, %v", b, err)
	}
	if _, err := Read(big, "seccomp profile", 100); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), big) {
		t.Errorf("Read(101 bytes, max 100) = %v, want ErrTooLarge naming the file", err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "a named pipe"},
		{"/dev/zero", "a character device"},
		{dir, "a directory"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := Read(tc.path, "seccomp profile", 100)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Errorf("Read(%s) = %v, want an error naming it and saying %q", tc.path, err, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Read(%s) still blocked after 5s", tc.path)
		}
	}
}

// TestShownQuotesUnprintable: a file's name that holds a terminal's
// control sequence, a direction override or bytes that are not UTF-8 is
// quoted in Read's error, so that it cannot rewrite the message; a plain
// name (spaces and letters of any script) is the control, shown as is.
func TestShownQuotesUnprintable(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a\x1b[31mred", "evil\u202etxt.toml", "bad\xffutf8", "bell\a"} {
		_, err := Read(filepath.Join(dir, name), "policy file", 100)
		if err == nil || strings.ContainsAny(err.Error(), "\x1b\a\u202e") || strings.Contains(err.Error(), "\xff") || !strings.Contains(err.Error(), `"`+dir) {
			t.Errorf("Read(%q) = %v, want the name quoted", name, err)
		}
	}
	plain := filepath.Join(dir, "my policy é.toml")
	if _, err := Read(plain, "policy file", 100); err == nil || !strings.Contains(err.Error(), "open "+plain+":") {
		t.Errorf("Read(%q) = %v, want the name as is", plain, err)
	}
}
