//go:build linux

package httpapi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/httpapi"
)

// TestTokensFileOwner: whoever can write the tokens file chooses who gets
// in, and the owner of a file can always write it (chmod first): a file
// of another user than root or the daemon's own is refused, as one
// writable by group or others is; the daemon's own 0600 file is the
// positive control.
func TestTokensFileOwner(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	tf := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tf, []byte(httpapi.HashToken("alice", "tok-a")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := httpapi.LoadTokens(tf)
	if err != nil {
		t.Fatalf("the daemon's own 0600 tokens file: %v", err)
	}
	if name, _, ok := tokens.Lookup("tok-a"); !ok || name != "alice" {
		t.Fatalf("lookup: %q %v", name, ok)
	}
	os.Chmod(tf, 0o620)
	if _, err := httpapi.LoadTokens(tf); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("a group-writable tokens file: %v", err)
	}
	os.Chmod(tf, 0o600)
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root; the run as root checks the refusal")
	}
	if err := os.Chown(tf, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := httpapi.LoadTokens(tf); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("a tokens file of another user: %v", err)
	}
}
