package sandbox_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/internal/daemonrec"
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

// TestRootDaemonPublicSocketRefused: a root daemon's socket on a path of
// its choosing (moat serve --socket DIR/moat.sock --socket-mode 0666),
// which it records where every user's run reads
// (sandbox.RecordPublicDaemonSockets), is refused for another user's own
// run (no daemon of that user's, a state directory of its own) that
// would show DIR, and for its tenant's. The controls: without the record,
// and with the socket no longer live, the same run compiles; so does one
// that does not show DIR, and one that denies the socket. A record that
// cannot be read refuses, and so does a directory of records that
// another user could change; a missing directory is no root daemon.
func TestRootDaemonPublicSocketRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a root daemon's record)")
	}
	saved := daemonrec.Dir
	t.Cleanup(func() { daemonrec.Dir = saved })
	public := t.TempDir() // root's, 0700 (others' runs could not read it: the test reads as root)
	daemonrec.Dir = filepath.Join(public, "daemons")
	rootState := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", t.TempDir()) // the user's: no record in it
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	sock := filepath.Join(dir, "moat.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	defer l.Close()
	os.Chmod(sock, 0o666)
	ws := t.TempDir()
	os.Chmod(filepath.Dir(ws), 0o755)
	os.Chmod(ws, 0o755)
	// A read-only path that shows no socket (the workspace itself may not
	// be listed: the workspace mode shows it).
	elsewhere := t.TempDir()
	os.Chmod(filepath.Dir(elsewhere), 0o755)
	os.Chmod(elsewhere, 0o755)
	const uid = 42452
	compile := func(c sandbox.Caller, shown, deny string) error {
		p := policy.Default()
		p.Workspace.Path = ws
		p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, shown)
		if deny != "" {
			p.Filesystem.Deny = append(p.Filesystem.Deny, deny)
		}
		_, err := sandbox.Compile(p, []string{"true"}, c, "run", nil, nil)
		return err
	}
	own := sandbox.Caller{UID: uid, GID: uid, Home: "/nonexistent", Cwd: ws, Environ: []string{"TMPDIR=/tmp"}}
	tenant := sandbox.Caller{UID: 0, GID: 0, Home: "/root", Cwd: ws, Owner: uid, OwnerGID: uid}
	callers := map[string]sandbox.Caller{"the user's own run": own, "the root daemon's tenant": tenant}
	refused := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "the moat daemon's socket "+sock)
	}

	for name, c := range callers { // no directory of records at all
		if err := compile(c, dir, ""); err != nil {
			t.Fatalf("%s, no record: %v", name, err)
		}
	}
	if err := sandbox.RecordPublicDaemonSockets(rootState, []string{sock}); err != nil {
		t.Fatal(err)
	}
	for name, c := range callers {
		if err := compile(c, dir, ""); !refused(err) {
			t.Errorf("%s, --ro %s: %v, want the root daemon's socket refused", name, dir, err)
		}
		if err := compile(c, dir, sock); err != nil {
			t.Errorf("%s, the socket denied: %v", name, err)
		}
		if err := compile(c, elsewhere, ""); err != nil {
			t.Errorf("%s, %s not shown: %v", name, dir, err)
		}
	}

	// A record that cannot be read, and a directory of records another
	// user could change (add to, or take a record away from): refused.
	junk := filepath.Join(daemonrec.Dir, "junk")
	os.Mkdir(junk, 0o755)
	if err := compile(own, elsewhere, ""); err == nil || !strings.Contains(err.Error(), "daemons' sockets") {
		t.Errorf("an unreadable record: %v, want a refusal", err)
	}
	os.Remove(junk)
	// One still being written, or left so by a killed daemon (mode 0600,
	// unreadable to others), is no record yet: skipped, where the same
	// thing under a record's name (above) refuses.
	partial := filepath.Join(daemonrec.Dir, ".tmp-12345")
	os.Mkdir(partial, 0o755)
	if err := compile(own, elsewhere, ""); err != nil {
		t.Errorf("a record being written: %v, want it skipped", err)
	}
	os.Remove(partial)
	os.Chmod(daemonrec.Dir, 0o777)
	if err := compile(own, elsewhere, ""); err == nil || !strings.Contains(err.Error(), "can be changed by others than root") {
		t.Errorf("records others can change: %v, want a refusal", err)
	}
	os.Chmod(daemonrec.Dir, 0o755)
	if err := compile(own, elsewhere, ""); err != nil {
		t.Errorf("the directory root's again: %v", err)
	}

	// The daemon has stopped, its record left behind: no longer a
	// socket anything listens on, nothing is refused.
	l.Close()
	os.Remove(sock)
	for name, c := range callers {
		if err := compile(c, dir, ""); err != nil {
			t.Errorf("%s, the daemon gone: %v", name, err)
		}
	}
	// Its record removed on a clean shutdown.
	if err := sandbox.RecordPublicDaemonSockets(rootState, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sandbox.PublicDaemonSocketsRecord(rootState)); !os.IsNotExist(err) {
		t.Errorf("record after removal: %v", err)
	}
}
