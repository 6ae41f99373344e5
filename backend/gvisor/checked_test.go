package gvisor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestCheckedCopy: the copy of a checked runsc has exactly the checked
// bytes and is made once; a runsc whose bytes are not the checked ones
// leaves no copy; a copy someone else could have changed (writable by
// others) is refused, not run. The control: the copy made, with its
// digest, is the one found again.
func TestCheckedCopy(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	dir := t.TempDir()
	runsc := filepath.Join(dir, "runsc")
	content := []byte("#!/bin/sh\nexit 0\n")
	if err := os.WriteFile(runsc, content, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	digest := hex.EncodeToString(sum[:])

	other := sha256.Sum256([]byte("another runsc"))
	if _, err := checkedCopy(runsc, hex.EncodeToString(other[:])); !errors.Is(err, ErrRunscChanged) {
		t.Errorf("a runsc that is not the checked one: %v, want ErrRunscChanged", err)
	}
	cache, err := checkedDir()
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Errorf("a refused copy left %v", ents)
	}

	p, err := checkedCopy(runsc, digest)
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, content) || filepath.Dir(p) != cache {
		t.Errorf("control: copy %s has %q", p, b)
	}
	os.WriteFile(runsc, []byte("changed"), 0o755)
	if again, err := checkedCopy(runsc, digest); err != nil || again != p {
		t.Errorf("control: the copy made is not found again: %q, %v", again, err)
	}

	if err := os.Chmod(p, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := checkedCopy(runsc, digest); err == nil {
		t.Error("a copy writable by others was run")
	}
	if _, err := checkedCopy(runsc, "../../runsc"); err == nil {
		t.Error("a digest that is a path was taken")
	}
}
