//go:build linux

package native

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/internal/overlay"
)

// TestMergeMarksTheLayer: the persistent upper layer carries
// overlay.MergeXattr while a run's layer is merged into it, keeps it when
// the merge fails half-way (as it would if init were killed), and has it
// removed once the merge is whole (the positive control).
func TestMergeMarksTheLayer(t *testing.T) {
	merge := func(t *testing.T, src, dst string) error {
		t.Helper()
		up, err := unix.Open(src, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(up)
		persist, err := unix.Open(dst, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(persist)
		return (&scratch{upperFD: up, persistFD: persist}).merge()
	}
	marked := func(dst string) bool {
		_, err := unix.Lgetxattr(dst, overlay.MergeXattr, make([]byte, 8))
		return err == nil
	}
	root := t.TempDir()
	src, dst := filepath.Join(root, "run"), filepath.Join(root, "persist")
	for _, d := range []string{src + "/a", src + "/b", dst + "/b"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(src, "a", "f"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(src, "b", "g"), []byte("b\n"), 0o644)
	// The merge copies a/ first, then stops at b/.
	testHookMergeEntry = func(d string) error {
		if filepath.Base(d) == "b" {
			return errors.New("stopped")
		}
		return nil
	}
	defer func() { testHookMergeEntry = nil }()
	if err := merge(t, src, dst); err == nil {
		t.Fatal("the stopped merge succeeded")
	}
	if _, err := os.Stat(filepath.Join(dst, "a", "f")); err != nil {
		t.Fatalf("the merge did not get half-way: %v", err)
	}
	if !marked(dst) {
		t.Error("a half-merged layer is not marked")
	}
	testHookMergeEntry = nil
	if err := merge(t, src, dst); err != nil {
		t.Fatal(err)
	}
	if marked(dst) {
		t.Error("a whole merge left the mark")
	}
	if b, err := os.ReadFile(filepath.Join(dst, "b", "g")); err != nil || string(b) != "b\n" {
		t.Errorf("b/g after the merge: %q %v", b, err)
	}
}
