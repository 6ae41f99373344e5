package daemon

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestTarLargeDirectories: a download lists every entry of directories
// several read batches long, a subdirectory's met in the middle of its
// parent's included; a directory past MaxTarEntries is refused with
// ErrQuota (the walk reads it a batch at a time, so it stops there
// without reading it whole).
func TestTarLargeDirectories(t *testing.T) {
	ws := t.TempDir()
	mk := func(dir string, n int) {
		if err := os.MkdirAll(filepath.Join(ws, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := os.WriteFile(filepath.Join(ws, dir, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("big", 3*tarDirBatch+7)
	mk("big/sub", tarDirBatch+1)
	_, s := ownSession(t, ws)
	var buf bytes.Buffer
	if err := s.tar("big", &buf, &LeftOut{}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	eachTarEntry(t, &buf, func(h *tar.Header, _ []byte) {
		if seen[h.Name] {
			t.Errorf("%s twice", h.Name)
		}
		seen[h.Name] = true
	})
	if want := 3*tarDirBatch + 7 + 1 + tarDirBatch + 1; len(seen) != want || !seen["sub/"] || !seen["sub/f00000"] || !seen["f00000"] {
		t.Errorf("%d entries, want %d", len(seen), want)
	}

	mk("huge", MaxTarEntries+1)
	if err := s.tar("huge", io.Discard, &LeftOut{}); !errors.Is(err, ErrQuota) {
		t.Errorf("a directory of %d entries: %v, want ErrQuota", MaxTarEntries+1, err)
	}
}

// eachTarEntry calls fn with each entry of the archive r and its content.
func eachTarEntry(t *testing.T, r io.Reader, fn func(h *tar.Header, body []byte)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		fn(h, body)
	}
}

// TestTarLeftOutSaid: an entry the daemon cannot read (a file and a
// directory a command made mode 000) is left out of a download and named,
// with the kernel's reason, so that the archive is not taken for the whole
// directory; the readable file beside them comes down (the positive
// control). As root, whom no mode keeps out, the kernel's refusal is
// played by a hook at the same place.
func TestTarLeftOutSaid(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "ok.txt"), []byte("readable"), 0o644)
	os.WriteFile(filepath.Join(ws, "closed.txt"), []byte("closed"), 0o000)
	os.MkdirAll(filepath.Join(ws, "shut/in"), 0o755)
	os.Chmod(filepath.Join(ws, "shut"), 0o000)
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "shut"), 0o755) })
	if os.Geteuid() == 0 {
		testHookTarOpen = func(name string) error {
			if name == "closed.txt" || name == "shut" {
				return syscall.EACCES
			}
			return nil
		}
		t.Cleanup(func() { testHookTarOpen = nil })
	}
	_, s := ownSession(t, ws)
	var buf bytes.Buffer
	left, err := s.Tar(".", &buf)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	eachTarEntry(t, &buf, func(h *tar.Header, b []byte) { seen[h.Name] = string(b) })
	if seen["ok.txt"] != "readable" {
		t.Errorf("the readable file: %q (entries %v)", seen["ok.txt"], seen)
	}
	if _, ok := seen["closed.txt"]; ok {
		t.Errorf("an unreadable file was written: %v", seen)
	}
	want := []string{"closed.txt", "shut"}
	got := slices.Clone(left.Paths)
	slices.Sort(got)
	if left.Count != 2 || !slices.Equal(got, want) {
		t.Fatalf("left out %d: %q, want %q", left.Count, left.Paths, want)
	}
	for _, why := range left.Why {
		if why != syscall.EACCES.Error() {
			t.Errorf("why: %q", why)
		}
	}
}
