package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/internal/daemonrec"
	"github.com/moatbox/moat/sandbox"
)

// The root daemons' public records of their sockets are the test's, not
// the machine's.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "moat-daemonrec-")
	if err != nil {
		panic(err)
	}
	daemonrec.Dir = filepath.Join(dir, "daemons")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

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

// TestSocketsRecordedPublicly: a root daemon also records its sockets
// where every user's run reads them (sandbox.PublicDaemonSocketsRecord,
// in a directory of root's, mode 0755, the record 0644), one record per
// state directory: a second daemon leaves the first's alone, a daemon
// that restarts on a state directory replaces what the previous one
// left, and shutting down removes the record. Another user's daemon
// records nothing there (it cannot write it).
func TestSocketsRecordedPublicly(t *testing.T) {
	sock1 := filepath.Join(t.TempDir(), "one.sock")
	sock2 := filepath.Join(t.TempDir(), "two.sock")
	// A daemon whose socket only its own user can reach records none.
	m0 := newManager(t, Config{Sockets: []string{filepath.Join(t.TempDir(), "own.sock")}})
	if _, err := os.Stat(sandbox.PublicDaemonSocketsRecord(m0.cfg.StateDir)); !os.IsNotExist(err) {
		t.Errorf("a daemon of unshared sockets: record %v, want none", err)
	}
	m1 := newManager(t, Config{Sockets: []string{sock1}, SharedSockets: true})
	rec1 := sandbox.PublicDaemonSocketsRecord(m1.cfg.StateDir)
	if filepath.Dir(rec1) != daemonrec.Dir {
		t.Fatalf("record %s is not in %s", rec1, daemonrec.Dir)
	}
	if os.Geteuid() != 0 {
		if _, err := os.Stat(rec1); !os.IsNotExist(err) {
			t.Errorf("uid %d's daemon: record %s: %v, want none", os.Geteuid(), rec1, err)
		}
		return
	}
	if fi, err := os.Stat(daemonrec.Dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("%s: %v %v, want mode 0755", daemonrec.Dir, fi, err)
	}
	if fi, err := os.Stat(rec1); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("%s: %v %v, want mode 0644", rec1, fi, err)
	}
	m2 := newManager(t, Config{Sockets: []string{sock2}, SharedSockets: true})
	rec2 := sandbox.PublicDaemonSocketsRecord(m2.cfg.StateDir)
	for rec, want := range map[string]string{rec1: sock1 + "\n", rec2: sock2 + "\n"} {
		if b, err := os.ReadFile(rec); err != nil || string(b) != want {
			t.Errorf("record %s: %q %v, want %q", rec, b, err, want)
		}
	}
	// A daemon that died left its record: the next on its state
	// directory replaces it.
	state := m1.cfg.StateDir
	m1.Shutdown(context.Background())
	if _, err := os.Stat(rec1); !os.IsNotExist(err) {
		t.Errorf("record after shutdown: %v", err)
	}
	if err := sandbox.RecordPublicDaemonSockets(state, []string{"/left/by/a/dead/daemon.sock"}); err != nil {
		t.Fatal(err)
	}
	m3, err := New(Config{StateDir: state, Engine: newFake, Sockets: []string{sock1}, SharedSockets: true})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(rec1); err != nil || string(b) != sock1+"\n" {
		t.Errorf("record after a restart: %q %v, want %q", b, err, sock1+"\n")
	}
	m3.Shutdown(context.Background())
	if b, err := os.ReadFile(rec2); err != nil || string(b) != sock2+"\n" {
		t.Errorf("the other daemon's record: %q %v", b, err)
	}
}
