package relpath

import (
	"errors"
	"testing"
)

// TestResolve walks a view given as a map of links; each refusal has a
// neighbour that resolves.
func TestResolve(t *testing.T) {
	links := map[string]string{
		"b":       ".",
		"up":      "..",
		"h":       ".git/hooks",
		"d/self":  "self",
		"d/abs":   "/etc",
		"d/sib":   "../e",
		"e/back":  "../d",
		"e/deep":  "back/sib/back/sib/x",
		"loop/a":  "b",
		"loop/b":  "a",
		"chain/x": "../b/b/b/..",
	}
	view := func(p string, _ bool) (string, bool, error) {
		t, ok := links[p]
		return t, ok, nil
	}
	for _, c := range []struct {
		from, rel, want string
		err             error
	}{
		{".", "a/b/c", "a/b/c", nil},
		{".", "b/x", "x", nil},
		{".", "b/..", "", ErrOut}, // lexically ".", the workspace's parent in fact
		{".", "b/x/..", ".", nil},
		{".", "up", "", ErrOut},
		{".", "h/pre-commit", ".git/hooks/pre-commit", nil},
		{"d", "sib/x", "e/x", nil},
		{"d", "abs", "", ErrOut},
		{"d", "self", "", ErrLoop},
		{"loop", "a", "", ErrLoop},
		{"e", "deep", "e/x", nil},
		{".", "chain/x", "", ErrOut},
		{"chain", "..", ".", nil},
	} {
		got, err := Resolve(c.from, c.rel, view)
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("Resolve(%q, %q) = %q, %v; want %q, %v", c.from, c.rel, got, err, c.want, c.err)
		}
	}
	stop := errors.New("stop")
	if _, err := Resolve(".", "a/b", func(string, bool) (string, bool, error) { return "", false, stop }); err != stop {
		t.Errorf("the view's error: %v", err)
	}
}
