package daemon

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	if err := s.Tar("big", &buf); err != nil {
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
	if err := s.Tar("huge", io.Discard); !errors.Is(err, ErrQuota) {
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
