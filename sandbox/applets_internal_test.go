package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAppletsChunked: the applet table is found wherever it lies in the
// file, a chunk boundary through its marker or its names included, while
// the file is read a chunk at a time (it was read whole, up to 64 MiB of
// moat's memory per exec, found by a tester); a file without one has no
// names.
func TestAppletsChunked(t *testing.T) {
	dir := t.TempDir()
	open := func(p string) (*os.File, error) { return os.Open(p) }
	table := "\x00[\x00[[\x00ash\x00cat\x00sh\x00\x00tail"
	want := []string{"[", "[[", "ash", "cat", "sh"}
	for _, at := range []int{0, 100, appletChunk - 3, appletChunk - 8, 2*appletChunk - 5, 3 * appletChunk} {
		p := filepath.Join(dir, "bb")
		data := append(bytes.Repeat([]byte{'x'}, at), table...)
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
		if got := applets(open, p); !slices.Equal(got, want) {
			t.Errorf("table at %d: %q, want %q", at, got, want)
		}
	}
	p := filepath.Join(dir, "plain")
	os.WriteFile(p, bytes.Repeat([]byte{0, '['}, appletChunk), 0o755)
	if got := applets(open, p); got != nil {
		t.Errorf("no table: %q", got)
	}
}
