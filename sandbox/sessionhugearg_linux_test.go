package sandbox_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
)

// TestSessionExecHugeArgument: a session's command whose program name is
// larger than the socket from its init takes in one answer fails at once,
// its error bounded: init's error, quoting the name whole, was lost, and
// the exec waited until the session ended (found by a tester).
// The control: a short missing name is quoted whole.
func TestSessionExecHugeArgument(t *testing.T) {
	ws := t.TempDir()
	s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: workspacePolicy(t, ws)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	for _, name := range []string{"no-such-program-here", strings.Repeat("a", 200000), strings.Repeat("a", 900000)} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out bytes.Buffer
		_, err := s.Exec(ctx, &sandbox.ExecRequest{Args: []string{name}}, backend.Stdio{Stdout: &out, Stderr: &out})
		late := ctx.Err()
		cancel()
		switch {
		case err == nil || late != nil:
			t.Errorf("a %d-byte program name: %.200v (%v)", len(name), err, late)
		case len(name) < 100 && !strings.Contains(err.Error(), name):
			t.Errorf("control: the error does not name the program: %v", err)
		case len(name) > 100 && len(err.Error()) > 10000:
			// Refused by init, quoting the name cut short, or, where the
			// request does not fit the socket (an ordinary user's send
			// buffer), by the host, saying so.
			t.Errorf("a %d-byte program name: an error of %d bytes: %.200s", len(name), len(err.Error()), err)
		}
	}
}
