//go:build linux

package workspace

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bigWorkspace is a change set over 10,000 text files in 100 directories
// with 100 changes in its upper layer: 80 files modified, 10 added, 10
// deleted.
func bigWorkspace(b *testing.B) *ChangeSet {
	b.Helper()
	root := b.TempDir()
	ws := filepath.Join(root, "ws")
	var body strings.Builder
	for l := 0; l < 40; l++ {
		fmt.Fprintf(&body, "line %d of some source file\n", l)
	}
	for d := 0; d < 100; d++ {
		dir := filepath.Join(ws, fmt.Sprintf("pkg%02d", d))
		os.MkdirAll(dir, 0o755)
		for f := 0; f < 100; f++ {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.go", f)), []byte(body.String()), 0o644)
		}
	}
	s := &Store{Dir: filepath.Join(root, "state")}
	c, err := s.Create(ws, "")
	if err != nil {
		b.Fatal(err)
	}
	up := c.UpperDir()
	for i := 0; i < 100; i++ {
		dir := filepath.Join(up, fmt.Sprintf("pkg%02d", i))
		os.MkdirAll(dir, 0o755)
		switch {
		case i < 80:
			os.WriteFile(filepath.Join(dir, "f00.go"), []byte(strings.Replace(body.String(), "line 20", "LINE 20", 1)), 0o644)
		case i < 90:
			os.WriteFile(filepath.Join(dir, "new.go"), []byte(body.String()), 0o644)
		default:
			if err := mknodWhiteout(filepath.Join(dir, "f00.go")); err != nil {
				b.Skip(err)
			}
		}
	}
	return c
}

func benchDiff(b *testing.B, format Format) {
	c := bigWorkspace(b)
	for b.Loop() {
		changes, err := c.Changes()
		if err != nil {
			b.Fatal(err)
		}
		if len(changes) != 100 {
			b.Fatalf("%d changes", len(changes))
		}
		if err := c.WriteDiff(io.Discard, changes, DiffOptions{Format: format}); err != nil {
			b.Fatal(err)
		}
	}
}

// The goal: a diff of 100 changes in a 10,000-file workspace in at
// most 50 ms.
func BenchmarkDiffSummary(b *testing.B) { benchDiff(b, Summary) }
func BenchmarkDiffPatch(b *testing.B)   { benchDiff(b, Patch) }

// Create does not depend on the workspace's size.
func BenchmarkCreate(b *testing.B) {
	c := bigWorkspace(b)
	s := &Store{Dir: filepath.Join(b.TempDir(), "state")}
	for b.Loop() {
		if _, err := s.Create(c.Workspace(), ""); err != nil {
			b.Fatal(err)
		}
	}
}
