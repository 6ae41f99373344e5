//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
)

// TestAuditVerifyRefusesWhatIsNoStream: moat audit verify of a device or
// a directory says so, naming it, at once (/dev/zero was read without
// end); a stream written into a named pipe, the control, verifies.
func TestAuditVerifyRefusesWhatIsNoStream(t *testing.T) {
	dir := t.TempDir()
	stream := filepath.Join(dir, "audit.jsonl")
	w, err := audit.Open(stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(audit.Decision{Type: audit.TypeDecision, Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		b, _ := os.ReadFile(stream)
		os.WriteFile(fifo, b, 0) // blocks until moat opens the pipe
	}()
	cases := []struct {
		path, want string
		code       int
	}{
		{"/dev/zero", "moat: /dev/zero: not an audit stream: a character device, not a file or a pipe", 1},
		{dir, "moat: " + dir + ": not an audit stream: a directory", 1},
		{fifo, "1 records, chain intact", 0},
	}
	for _, c := range cases {
		type result struct {
			code      int
			out, errs string
		}
		done := make(chan result, 1)
		go func() {
			code, out, errs := moat(t, dir, "audit", "verify", c.path)
			done <- result{code, out, errs}
		}()
		select {
		case r := <-done:
			if r.code != c.code || !strings.Contains(r.out+r.errs, c.want) {
				t.Errorf("audit verify %s = %d %q %q, want %d and %q", c.path, r.code, r.out, r.errs, c.code, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("audit verify %s still running after 10s", c.path)
		}
	}
}

// TestAuditVerifyQuotesOddNames: a file's name holding a terminal's
// escape (a name a command made, picked up by a glob) is shown escaped in
// what moat audit verify prints, missing or broken; a plain name is the
// control, shown as is.
func TestAuditVerifyQuotesOddNames(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "a\x1b[31mb")
	os.WriteFile(broken, []byte("x\n"), 0o644)
	for _, name := range []string{broken, filepath.Join(dir, "gone\x1b]0;t\a")} {
		_, out, errs := moat(t, dir, "audit", "verify", name)
		if strings.ContainsAny(out+errs, "\x1b\a") || !strings.Contains(out+errs, dir+`/`) || !strings.Contains(out+errs, `\x1b`) {
			t.Errorf("%q: out %q err %q, want the name escaped", name, out, errs)
		}
	}
	plain := filepath.Join(dir, "plain log")
	os.WriteFile(plain, []byte("x\n"), 0o644)
	if _, out, _ := moat(t, dir, "audit", "verify", plain); !strings.HasPrefix(out, plain+":1: chain broken") {
		t.Errorf("control: %q", out)
	}
}
