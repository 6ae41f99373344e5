package client

import (
	"slices"
	"testing"
)

// TestLeftOutRoundTrip: the names of a download's left-out entries come
// back as the daemon sent them, whatever bytes a command put in them
// (spaces, quotes, newlines, escapes, invalid UTF-8), and the trailer
// stays one line of ASCII.
func TestLeftOutRoundTrip(t *testing.T) {
	paths := []string{"plain", "with space", `quo"te`, "new\nline", "esc\x1b[2J", "bad\xff", ""}
	why := make([]string, len(paths))
	for i := range why {
		why[i] = "permission denied"
	}
	v := FormatLeftOut(9, paths, why)
	for _, c := range []byte(v) {
		if c < 0x20 || c > 0x7e {
			t.Fatalf("the trailer holds byte %#x: %q", c, v)
		}
	}
	e := parseLeftOut(v)
	if e.Count != 9 || !slices.Equal(e.Paths, paths) || !slices.Equal(e.Why, why) {
		t.Errorf("round trip: %d %q %q", e.Count, e.Paths, e.Why)
	}
	// A trailer of another daemon's making still says something was
	// left out.
	if e := parseLeftOut("junk"); e.Count < 1 {
		t.Errorf("junk: %+v", e)
	}
}
