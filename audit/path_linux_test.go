package audit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOpenThroughASearchOnlyDirectory: a directory its user may go
// through but not read (mode 0100) is on the way to a stream as any
// other: the stream opens, as os.OpenFile would open it. The control,
// for a user other than root (whom no mode stops): the directory cannot
// be opened to read. Run it as an ordinary user too (MOAT_TEST_USER).
func TestOpenThroughASearchOnlyDirectory(t *testing.T) {
	dir := t.TempDir()
	through := filepath.Join(dir, "through")
	if err := os.MkdirAll(filepath.Join(through, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(through, 0o100); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(through, 0o700) })
	if os.Geteuid() != 0 {
		if f, err := os.Open(through); err == nil {
			f.Close()
			t.Fatal("control: the search-only directory opened to read")
		}
	}
	w, err := Open(filepath.Join(through, "sub", "audit.jsonl"))
	if err != nil {
		t.Fatalf("through a search-only directory: %v", err)
	}
	if err := w.Write(map[string]any{"x": 1}); err != nil {
		t.Error(err)
	}
	if err := w.Close(); err != nil {
		t.Error(err)
	}
}
