package overlay

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestIsWhiteout(t *testing.T) {
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh")
	if err := unix.Mknod(wh, unix.S_IFCHR, 0); err != nil {
		t.Skipf("mknod of a whiteout (0/0) as uid %d: %v (Linux before 5.8 asks for CAP_MKNOD)", os.Geteuid(), err)
	}
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	for name, want := range map[string]bool{"wh": true, "file": false} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := IsWhiteout(fi); got != want {
			t.Errorf("%s: IsWhiteout %v, want %v", name, got, want)
		}
	}
	if fi, err := os.Lstat("/dev/null"); err == nil && IsWhiteout(fi) {
		t.Error("/dev/null (1/3) taken for a whiteout")
	}
}
