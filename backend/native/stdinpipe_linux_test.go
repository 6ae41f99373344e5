package native_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
)

// TestStdinPipeNotWritable: the command cannot write into its caller's
// stdin pipe. A pipe is reopened through /proc/self/fd/0 by any process
// of the uid that made it, for writing too, and an ordinary user's
// command runs as that user: what it wrote there, a host shell reading
// the same pipe after moat (`... | bash`) ran (found by a tester). Such
// a pipe is read through one of the backend's own. The control: the
// command reads what the caller sent, and its write to /proc/self/fd/0
// is made (into its own pipe) or refused, never reaching the caller's.
func TestStdinPipeNotWritable(t *testing.T) {
	ws := t.TempDir()
	const probe = `read line; echo "got $line"; (echo injected > /proc/self/fd/0) 2>/dev/null && echo WROTE || echo REFUSED`
	check := func(t *testing.T, name string, run func(stdin *os.File, out *bytes.Buffer) error) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		w.WriteString("hello\n")
		var out bytes.Buffer
		err = run(r, &out)
		w.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.HasPrefix(out.String(), "got hello\n") {
			t.Fatalf("%s: control: the command read %q", name, out.String())
		}
		r.SetReadDeadline(time.Now().Add(2 * time.Second))
		rest, _ := io.ReadAll(r)
		if strings.Contains(string(rest), "injected") {
			t.Errorf("%s: the command wrote into the caller's stdin pipe (it said %q)", name, out.String())
		}
	}
	for _, b := range []*native.Backend{{}, {ForkStart: true}, {InitStage: true}} {
		check(t, "Run "+backendName(b), func(stdin *os.File, out *bytes.Buffer) error {
			var errb bytes.Buffer
			st, err := b.Run(context.Background(), spec(t, ws, "/bin/sh", "-c", probe), backend.Stdio{Stdin: stdin, Stdout: out, Stderr: &errb})
			if err == nil && st.ExitCode != 0 {
				t.Errorf("exit %d: %s", st.ExitCode, errb.String())
			}
			return err
		})
	}
	// A session's stdin is its caller's own pipe (the daemon's), which
	// nothing on the host reads: it is passed as it is
	// (TestSessionTerminalNotPassed).
}
