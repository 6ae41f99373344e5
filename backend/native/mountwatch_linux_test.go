package native

import "testing"

// TestUnescapeMountinfo: a mount point with a space, a tab, a newline or a
// backslash in its name reads as the path the Spec names (a protection
// misread would fail its watch's start); the control, a plain path and a
// backslash not followed by three octal digits, is left as it is.
func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/w/my\040dir/.git/config`: "/w/my dir/.git/config",
		`/w/a\011b\012c\134d`:      "/w/a\tb\nc\\d",
		"/w/plain":                 "/w/plain",
		`/w/x\09`:                  `/w/x\09`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
