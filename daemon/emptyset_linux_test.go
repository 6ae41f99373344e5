//go:build linux

package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/workspace"
)

// TestEmptyChangeSetDiscarded: an overlay session that wrote nothing
// leaves no change set when it ends (each stayed, empty, listed by moat
// runs and picked by apply and diff as the latest; moat mcp's start-up
// probe left one per connection). The control: a session that wrote a
// file keeps its change set for review.
func TestEmptyChangeSetDiscarded(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, Config{Engine: Sandboxes})
	ctx := context.Background()
	tenant := UIDTenant(os.Geteuid())
	for _, tc := range []struct {
		script string
		kept   bool
	}{{"true", false}, {"echo x > f", true}} {
		s, err := m.Create(ctx, tenant, &CreateRequest{Workspace: ws, WorkspaceMode: "overlay"})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := s.Exec(ctx, &ExecRequest{Args: []string{"sh", "-c", tc.script}}, backend.Stdio{})
		if err != nil || rep.ExitCode != 0 {
			t.Fatalf("%s: %+v, %v", tc.script, rep, err)
		}
		cs := s.ChangeSet()
		if cs == "" {
			t.Fatal("an overlay session without a change set")
		}
		if err := m.Delete(ctx, tenant, s.ID); err != nil {
			t.Fatal(err)
		}
		c, err := workspace.Open(cs)
		switch {
		case tc.kept && err != nil:
			t.Errorf("%s: the change set is gone: %v", tc.script, err)
		case !tc.kept && !errors.Is(err, workspace.ErrNotFound):
			t.Errorf("%s: the empty change set stays: %v", tc.script, err)
		}
		if c != nil {
			c.Discard()
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the workspace was written: %v", err)
	}
}
