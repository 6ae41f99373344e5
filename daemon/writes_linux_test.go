//go:build linux

package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/sandbox"
	"golang.org/x/sys/unix"
)

// TestCutWritesReaped: a write of the files API makes its entry at the
// workspace's root, whatever directory it is for, and a daemon that finds
// a dead one's record removes such entries from the tenant's workspace,
// and nothing else there.
func TestCutWritesReaped(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "sub", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, Config{})
	ctx := context.Background()
	s, err := m.Create(ctx, UIDTenant(os.Geteuid()), &CreateRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.checkWrite(ctx, sandbox.WriteFile, "sub/dir/f")
	if err != nil {
		t.Fatal(err)
	}
	var atRoot bool
	err = s.place("sub/dir/f", d, func(at *os.File, tmp string) error {
		fd, err := unix.Openat(int(at.Fd()), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		unix.Close(fd)
		_, err = os.Lstat(filepath.Join(ws, tmp))
		atRoot = err == nil && isWriteTemp(tmp)
		return nil
	})
	if err != nil || !atRoot {
		t.Fatalf("place: %v; the entry in flight at the root: %v", err, atRoot)
	}
	if _, err := os.Stat(filepath.Join(ws, "sub", "dir", "f")); err != nil {
		t.Errorf("not renamed into place: %v", err)
	}
	if err := s.WriteFile(ctx, "sub/g", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := json.Marshal(s.record()); err != nil || s.record().Workspace != ws {
		t.Fatalf("the record does not name the workspace: %s %v", data, err)
	}

	// What a daemon killed mid-write leaves, and a record naming the
	// tenant's workspace.
	state := t.TempDir()
	os.MkdirAll(filepath.Join(state, "daemon", "sessions"), 0o700)
	cut := filepath.Join(ws, writeTempPrefix+"0123456789abcdef")
	keep := []string{filepath.Join(ws, writeTempPrefix+"notes"), filepath.Join(ws, "sub", writeTempPrefix+"0123456789abcdee"), filepath.Join(ws, "sub", "g")}
	for _, p := range append(keep, cut) {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := json.Marshal(&record{ID: "dddd", Workspace: ws})
	os.WriteFile(filepath.Join(state, "daemon", "sessions", "dddd.json"), data, 0o600)
	m2, err := New(Config{StateDir: state, Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Shutdown(ctx)
	if len(m2.Reaped) != 1 {
		t.Errorf("reaped %v", m2.Reaped)
	}
	if _, err := os.Lstat(cut); !os.IsNotExist(err) {
		t.Errorf("the cut write is left: %v", err)
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

// TestReapSaysUnrevokedSecrets: a daemon that finds a dead one's record
// of a session whose secrets have revoke programs says they were not
// revoked (nothing of the dead daemon is left to run them); a record
// without such secrets says nothing of it.
func TestReapSaysUnrevokedSecrets(t *testing.T) {
	state := t.TempDir()
	os.MkdirAll(filepath.Join(state, "daemon", "sessions"), 0o700)
	for id, revoke := range map[string][]string{"aaaa": {"GH_TOKEN"}, "bbbb": nil} {
		data, _ := json.Marshal(&record{ID: id, Revoke: revoke})
		os.WriteFile(filepath.Join(state, "daemon", "sessions", id+".json"), data, 0o600)
	}
	var logs bytes.Buffer
	m, err := New(Config{StateDir: state, Engine: newFake, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	out := logs.String()
	if !strings.Contains(out, "GH_TOKEN were not revoked") {
		t.Errorf("the log does not name the unrevoked secret:\n%s", out)
	}
	if strings.Count(out, "were not revoked") != 1 {
		t.Errorf("a session without revoke programs was said to have some:\n%s", out)
	}
}
