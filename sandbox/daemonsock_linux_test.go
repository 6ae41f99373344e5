package sandbox_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// A root daemon's socket, recorded in its state directory (which its
// tenants cannot read), is refused for a tenant's run as for its own:
// the record is read with the daemon's rights. A record that cannot be
// read refuses the run; a missing one is no daemon.
func TestDaemonSocketRefusedForTenant(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a tenant's rights)")
	}
	state := t.TempDir() // 0700, root's
	t.Setenv("MOAT_STATE_DIR", state)
	shown := t.TempDir()
	os.Chmod(filepath.Dir(shown), 0o755)
	os.Chmod(shown, 0o755)
	sock := filepath.Join(shown, "moat.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ws := t.TempDir()
	os.Chmod(filepath.Dir(ws), 0o755)
	os.Chmod(ws, 0o755)
	compile := func(owner int) error {
		p := policy.Default()
		p.Workspace.Path = ws
		p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, shown)
		c := sandbox.Caller{UID: 0, GID: 0, Home: "/root", Cwd: ws, Owner: owner, OwnerGID: owner}
		_, err := sandbox.Compile(p, []string{"true"}, c, "run", nil, nil)
		return err
	}
	// No record: the socket is no daemon's the run knows of.
	for _, owner := range []int{0, 42451} {
		if err := compile(owner); err != nil {
			t.Fatalf("owner %d, no record: %v", owner, err)
		}
	}
	if err := sandbox.RecordDaemonSockets(state, []string{sock}); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []int{0, 42451} { // the daemon's own run is the control
		if err := compile(owner); err == nil || !strings.Contains(err.Error(), "the moat daemon's socket "+sock) {
			t.Errorf("owner %d: %v, want the daemon's socket refused", owner, err)
		}
	}
	// A record that is there and cannot be read: refused, not skipped.
	rec := sandbox.DaemonSocketsRecord(state)
	os.Remove(rec)
	if err := os.Mkdir(rec, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := compile(42451); err == nil || !strings.Contains(err.Error(), "daemons' sockets") {
		t.Errorf("unreadable record: %v, want a refusal", err)
	}
}
