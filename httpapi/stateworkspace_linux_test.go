package httpapi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// TestWorkspaceInStateDirRefused: a session whose workspace is in the
// daemon's state directory, or holds it, is refused: a command there
// wrote a session record that the next daemon, started as root, acted on
// (it removed a directory the record named; found by a tester). The
// controls: a workspace the daemon makes there, and one beside it, run.
func TestWorkspaceInStateDirRefused(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	beside := filepath.Join(filepath.Dir(d.state), "beside")
	if err := os.Mkdir(beside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{d.state, filepath.Join(d.state, "daemon"), filepath.Join(d.state, "daemon", "sessions"), filepath.Join(d.state, "daemon", "workspaces"), filepath.Dir(d.state)} {
		s, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{Workspace: ws})
		if err == nil {
			d.c.DeleteSession(ctx, s.ID)
		}
		if apiCode(err) != "workspace_refused" || !strings.Contains(err.Error(), "state directory") {
			t.Errorf("workspace %s: %v, want workspace_refused naming the state directory", ws, err)
		}
	}
	for _, ws := range []string{"", beside} {
		s, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{Workspace: ws})
		if err != nil {
			t.Errorf("control, workspace %q: %v", ws, err)
			continue
		}
		if _, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"touch", "x"}}); rep.ExitCode != 0 {
			t.Errorf("control, workspace %q: %+v", ws, rep)
		}
		d.c.DeleteSession(ctx, s.ID)
	}
}
