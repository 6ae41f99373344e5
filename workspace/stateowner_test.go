package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestStateDirOthersCanWrite: a state directory other users can write,
// or one in a directory they can write without the sticky bit, is
// refused (as root, moat applied a change set another user forged in a
// shared state directory, and ran with a policy that user trusted for
// it; found by a tester). The controls: the caller's own 0700 and 0755
// directories, in /tmp-like sticky directories too, and a missing one.
func TestStateDirOthersCanWrite(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := mk("open", 0o777)
	sticky := mk("sticky", 0o777|os.ModeSticky)
	for _, tc := range []struct {
		dir string
		ok  bool
	}{
		{mk("own", 0o700), true},
		{mk("readable", 0o755), true},
		{filepath.Join(base, "missing"), true},
		{filepath.Join(sticky, "state"), true},
		{mk("shared", 0o777), false},
		{mk("sharedsticky", 0o777|os.ModeSticky), false},
		{mk("groupwritable", 0o770), false},
		{filepath.Join(open, "state"), false},
		{foreign(t, mk("foreign", 0o700)), false},
	} {
		if tc.dir == "" {
			continue
		}
		if filepath.Base(tc.dir) == "state" {
			os.Mkdir(tc.dir, 0o700)
		}
		t.Setenv("MOAT_STATE_DIR", tc.dir)
		_, err := StateDir()
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.dir, err)
		}
		if !tc.ok && !errors.Is(err, ErrStateDirUnsafe) {
			t.Errorf("%s: %v, want it refused", tc.dir, err)
		}
	}
}

// foreign hands p to another user, as root; "" (the case skipped) as
// anyone else, who cannot.
func foreign(t *testing.T, p string) string {
	if os.Geteuid() != 0 {
		return ""
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return p
}
