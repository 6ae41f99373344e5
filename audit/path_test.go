package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenRefusesALinkOnThePath: a link anywhere on the path of a stream
// (a directory of it, not only its last component) is refused, naming
// the link, by Open, OpenRecover and OpenFile, and nothing is made where
// it leads. The controls: the same file by its real path, by a relative
// path, and in /tmp (sticky), opens and verifies.
func TestOpenRefusesALinkOnThePath(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.MkdirAll(filepath.Join(real, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(real, "inner")
	if err := os.Symlink("sub", inner); err != nil {
		t.Fatal(err)
	}
	for path, component := range map[string]string{
		filepath.Join(link, "audit.jsonl"):        link,
		filepath.Join(link, "sub", "audit.jsonl"): link,
		filepath.Join(inner, "audit.jsonl"):       inner,
		filepath.Join(real, "inner"):              inner,
	} {
		opens := map[string]func() error{
			"Open": func() error {
				w, err := Open(path)
				if err == nil {
					w.Close()
				}
				return err
			},
			"OpenRecover": func() error {
				w, _, err := OpenRecover(path)
				if err == nil {
					w.Close()
				}
				return err
			},
			"OpenFile": func() error {
				f, err := OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
				if err == nil {
					f.Close()
				}
				return err
			},
		}
		for name, open := range opens {
			err := open()
			var le *LinkError
			if !errors.As(err, &le) || le.Component != component || !errors.Is(err, ErrNotAFile) || !strings.Contains(err.Error(), component+" is a symbolic link") {
				t.Errorf("%s(%s) = %v, want a LinkError naming %s", name, path, err, component)
			}
		}
	}
	for _, p := range []string{filepath.Join(real, "audit.jsonl"), filepath.Join(real, "sub", "audit.jsonl")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was made through a link", p)
		}
	}

	// The controls.
	t.Chdir(real)
	for _, p := range []string{filepath.Join(real, "sub", "audit.jsonl"), "audit.jsonl", "sub/../audit.jsonl", filepath.Join("/tmp", filepath.Base(dir)+".audit.jsonl")} {
		w, err := Open(p)
		if err != nil {
			t.Errorf("the control %s: %v", p, err)
			continue
		}
		if err := w.Write(map[string]any{"x": 1}); err != nil {
			t.Error(err)
		}
		w.Close()
		if strings.HasPrefix(p, "/tmp/") {
			defer os.Remove(p)
		}
	}
	if n, _, err := verifyFile(t, filepath.Join(real, "audit.jsonl")); n != 2 || err != nil {
		t.Errorf("the control: %d records, %v", n, err)
	}
}

// TestOpenFileFollowsOnlyTheSystemsLinks: a link root made in a directory
// only root writes (/bin, on a system whose /bin is a link to usr/bin) is
// followed for another user, not for root, whose sandboxes' links are
// root's too. Run it as an ordinary user too (MOAT_TEST_USER).
func TestOpenFileFollowsOnlyTheSystemsLinks(t *testing.T) {
	fi, err := os.Lstat("/bin")
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Skip("/bin is not a link here")
	}
	f, err := OpenFile("/bin/sh", os.O_RDONLY, 0)
	if os.Geteuid() == 0 {
		var le *LinkError
		if !errors.As(err, &le) || le.Component != "/bin" {
			t.Errorf("as root: %v, want /bin refused", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("as uid %d: %v", os.Geteuid(), err)
	}
	defer f.Close()
	want, err := os.Stat("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.Stat(); err != nil || !os.SameFile(got, want) {
		t.Errorf("opened %v, not /bin/sh", got)
	}
}
