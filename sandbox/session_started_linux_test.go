package sandbox_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSessionExecStarted: ExecStarted hands over the running command, whose
// terminal a resize then changes while Exec waits: the command sees the
// size it started with, then the new one.
func TestSessionExecStarted(t *testing.T) {
	s := newSession(t, t.TempDir(), nil)
	inR, inW := io.Pipe()
	var out lockedBuffer
	req := &sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", "stty size; read line; stty size"}, Tty: true, Rows: 30, Cols: 100}
	rep, err := s.ExecStarted(context.Background(), req, backend.Stdio{Stdin: inR, Stdout: &out}, func(p *sandbox.Process) {
		go func() {
			// The first size is read before the resize.
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "30 100") && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			if err := p.Resize(40, 120); err != nil {
				t.Errorf("resize: %v", err)
			}
			inW.Write([]byte("\r"))
		}()
	})
	inW.Close()
	if err != nil || rep.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, rep)
	}
	got := strings.ReplaceAll(out.String(), "\r\n", "\n")
	if !strings.Contains(got, "30 100\n") || !strings.Contains(got, "40 120\n") {
		t.Errorf("the command saw %q, want 30 100 then 40 120", got)
	}
}
