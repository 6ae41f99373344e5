package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/sandbox"
)

// TestSocketInSightRefused: a session whose commands would see one of the
// daemon's sockets (in the workspace, or under a path its policy shows)
// is refused, naming the socket; the same session with the socket
// elsewhere is made (the control).
func TestSocketInSightRefused(t *testing.T) {
	ws := t.TempDir()
	shown := t.TempDir()
	elsewhere := t.TempDir()
	ctx := context.Background()
	me := UIDTenant(os.Geteuid())
	for _, tc := range []struct {
		name, sock, policy string
		refused            bool
	}{
		{"in the workspace", filepath.Join(ws, "sub", "moat.sock"), "", true},
		{"under a path the policy shows", filepath.Join(shown, "moat.sock"), "[filesystem]\nread_only = [\"" + shown + "\"]\n", true},
		{"elsewhere", filepath.Join(elsewhere, "moat.sock"), "[filesystem]\nread_only = [\"" + shown + "\"]\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, Config{Sockets: []string{tc.sock}})
			_, err := m.Create(ctx, me, &CreateRequest{Workspace: ws, Policy: tc.policy})
			if tc.refused != (err != nil) || err != nil && (!errors.Is(err, ErrWorkspace) || !strings.Contains(err.Error(), tc.sock)) {
				t.Errorf("create: %v (refusal wanted: %v)", err, tc.refused)
			}
		})
	}
}

// TestSocketsRecorded: the daemon records its sockets in its state
// directory while it runs, where sandbox.Run finds them (and refuses a run
// that would show one: sandbox TestDaemonSocketInSightRefused), and
// removes the record when it shuts down.
func TestSocketsRecorded(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "moat.sock")
	m := newManager(t, Config{Sockets: []string{sock}})
	record := sandbox.DaemonSocketsRecord(m.cfg.StateDir)
	if b, err := os.ReadFile(record); err != nil || string(b) != sock+"\n" {
		t.Errorf("record %s: %q %v, want %q", record, b, err, sock+"\n")
	}
	m.Shutdown(context.Background())
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Errorf("record after shutdown: %v", err)
	}
}
