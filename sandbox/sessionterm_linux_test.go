package sandbox_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/pty"
	"github.com/moatbox/moat/sandbox"
)

// TestSessionExecToTerminalFiltered: a library caller's session command
// writing to a terminal is filtered as a Run's is (a clipboard write
// dropped, a Denial of the terminal layer); the control: the same output
// to a buffer is kept as written.
func TestSessionExecToTerminalFiltered(t *testing.T) {
	s := newSession(t, t.TempDir(), nil)
	const script = `printf 'a\033]52;c;cm0gLXJmIH4K\007b\033]0;moat-title\007c\n'`
	req := &sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", script}}

	var buf bytes.Buffer
	rep, err := s.Exec(context.Background(), req, backend.Stdio{Stdout: &buf, Stderr: &buf})
	if err != nil || rep.ExitCode != 0 || !strings.Contains(buf.String(), "a\x1b]52;c;cm0gLXJmIH4K\x07b") {
		t.Fatalf("to a buffer: %v %+v %q: want the output as written", err, rep, buf.String())
	}

	master, tty, err := pty.Open(24, 80)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer master.Close()
	shown := make(chan string)
	go func() {
		b, _ := io.ReadAll(master) // EIO once the terminal is closed
		shown <- string(b)
	}()
	rep, err = s.Exec(context.Background(), req, backend.Stdio{Stdout: tty, Stderr: tty})
	tty.Close()
	got := <-shown
	if err != nil || rep.ExitCode != 0 {
		t.Fatalf("to a terminal: %v %+v", err, rep)
	}
	if strings.Contains(got, "]52;") || !strings.Contains(got, "ab\x1b]0;moat-title\x07c") {
		t.Errorf("the terminal showed %q: want the text and the title, no clipboard write", got)
	}
	found := false
	for _, d := range rep.Denials {
		if d.Layer == backend.LayerTerminal && strings.HasPrefix(d.What, "OSC 52") && d.Count == 1 && d.Hint != "" {
			found = true
		}
	}
	if !found {
		t.Errorf("the report's denials %+v: want the clipboard write", rep.Denials)
	}
}
