package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkOnTheWay: a path through a link below the root, on its way or
// named with a trailing slash, counts; a path that stops existing, or
// reaches a file, on its way does not (nothing beyond it can be deleted),
// nor does a link named as the last component alone (rm removes the link).
// A path that cannot be looked at (a name too long) counts as one through
// a link: the look fails closed.
func TestLinkOnTheWay(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "tmp/d"), 0o755)
	os.WriteFile(filepath.Join(root, "tmp/f"), nil, 0o644)
	os.Symlink("/elsewhere", filepath.Join(root, "tmp/l"))
	for w, want := range map[string]bool{
		"/tmp/l/x":  true,
		"/tmp/l/":   true,
		"/tmp/l/.":  true,
		"/tmp/l":    false,
		"/tmp/d/x":  false,
		"/tmp/no/x": false,
		"/tmp/f/x":  false,
		"rel/l/x":   false,
		"/tmp/" + strings.Repeat("n", 300) + "/x": true,
	} {
		if got := linkOnTheWay(root, []string{"rm", "-rf", w}); got != want {
			t.Errorf("%s: %v, want %v", w, got, want)
		}
	}
}
