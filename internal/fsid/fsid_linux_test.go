package fsid

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// A file a user reaches only through a supplementary group is read with
// that group given, and refused without it.
func TestDoGroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	// Numbers with no entry in /etc/passwd or /etc/group: setgroups takes
	// numbers.
	const uid, gid, team = 42421, 42422, 42423
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil && d == dir {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "team-only")
	if err := os.WriteFile(file, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(file, 0, team); err != nil {
		t.Fatal(err)
	}
	read := func(groups []int) error {
		var err error
		if derr := Do(uid, gid, groups, func() { _, err = os.ReadFile(file) }); derr != nil {
			t.Fatal(derr)
		}
		return err
	}
	if err := read([]int{gid + 100, team}); err != nil {
		t.Errorf("with group %d: %v", team, err)
	}
	if err := read(nil); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("with no groups: %v, want a permission error", err)
	}
	if err := read([]int{gid + 100}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("with other groups: %v, want a permission error", err)
	}
	// The process's own groups are untouched.
	if _, err := os.ReadFile(file); err != nil {
		t.Errorf("as root after: %v", err)
	}
}
