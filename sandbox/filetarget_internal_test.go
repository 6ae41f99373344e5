package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFileTarget: a file mount lands where the host's links lead, so
// that a link into a tree the sandbox does not show (systemd-resolved's
// /etc/resolv.conf -> ../run/systemd/resolve/stub-resolv.conf) does not
// stop the run: relative and absolute links, a chain, one to nothing.
// The control: a plain file is its own target.
func TestFileTarget(t *testing.T) {
	dir := t.TempDir()
	etc := filepath.Join(dir, "etc")
	os.MkdirAll(etc, 0o755)
	os.WriteFile(filepath.Join(etc, "plain"), nil, 0o644)
	os.Symlink("../run/systemd/resolve/stub-resolv.conf", filepath.Join(etc, "resolv.conf"))
	os.Symlink(filepath.Join(etc, "static", "hosts"), filepath.Join(etc, "hosts"))
	os.MkdirAll(filepath.Join(etc, "static"), 0o755)
	os.Symlink("../../store/hosts", filepath.Join(etc, "static", "hosts"))
	for p, want := range map[string]string{
		filepath.Join(etc, "plain"):       filepath.Join(etc, "plain"),
		filepath.Join(etc, "resolv.conf"): filepath.Join(dir, "run/systemd/resolve/stub-resolv.conf"),
		filepath.Join(etc, "hosts"):       filepath.Join(dir, "store/hosts"),
		filepath.Join(etc, "missing"):     filepath.Join(etc, "missing"),
	} {
		if got := fileTarget(p); got != want {
			t.Errorf("fileTarget(%s) = %s, want %s", p, got, want)
		}
	}
}
