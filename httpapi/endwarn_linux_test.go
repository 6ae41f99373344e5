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

// TestDeleteSaysRevokeFailed: a session whose secret's revoke program
// fails when it ends tells the client that ended it (DELETE answers 200
// with the warning), not only the daemon's log: the minted value may
// still be valid. The control: the same session with a revoke that works
// is answered 204, no warnings, and the revoke ran with the value.
func TestDeleteSaysRevokeFailed(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	dir := t.TempDir()
	revoked := filepath.Join(dir, "revoked")
	os.WriteFile(filepath.Join(dir, "mint.sh"), []byte("echo minted-value\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "ok.sh"), []byte("cat > "+revoked+"\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "bad.sh"), []byte("echo no such token >&2; exit 3\n"), 0o755)
	for _, revoke := range []string{"ok.sh", "bad.sh"} {
		pol := "[network]\nmode = \"allow\"\nallow = [\"api.test\"]\n\n[[secrets]]\nname = \"TOK\"\nsource = \"command:/bin/sh mint.sh\"\nhosts = [\"api.test\"]\nrevoke = \"/bin/sh " + revoke + "\"\n"
		s := d.create(t, &client.CreateSessionRequest{Policy: pol, PolicyFile: filepath.Join(dir, "p.toml"), Workspace: t.TempDir()})
		end, err := d.c.EndSession(context.Background(), s.ID)
		if err != nil {
			t.Fatalf("%s: end: %v", revoke, err)
		}
		if revoke == "ok.sh" {
			if len(end.Warnings) != 0 {
				t.Errorf("control: a revoke that worked: warnings %q", end.Warnings)
			}
			if b, _ := os.ReadFile(revoked); string(b) != "minted-value\n" {
				t.Errorf("control: revoked %q, want the minted value", b)
			}
			continue
		}
		said := strings.Join(end.Warnings, "\n")
		if !strings.Contains(said, "TOK") || !strings.Contains(said, "revok") {
			t.Errorf("a revoke that failed: warnings %q, want one naming TOK's revoke", end.Warnings)
		}
		if strings.Contains(said, "minted-value") {
			t.Errorf("the warning shows the secret's value: %q", said)
		}
	}
}
