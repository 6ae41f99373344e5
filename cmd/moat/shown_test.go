package main

import (
	"strings"
	"testing"
)

// TestShown: a directory or a host in the terminal question is shown
// quoted, escaped, when it has a character that could change what the
// person reads: controls, and the bidirectional controls that reorder
// what the terminal displays. Plain text, UTF-8 included, stays as it
// is (the positive control).
func TestShown(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"/w/src", "/w/src"},
		{"/w/café", "/w/café"},
		{"/w/d\x1b[2K\rin .", `"/w/d\x1b[2K\rin ."`},
		{"/w/txt.\u202eexe", `"/w/txt.\u202eexe"`},
		{"/w/a\u2066b\u2069", `"/w/a\u2066b\u2069"`},
		{"/w/a\u200fb", `"/w/a\u200fb"`},
		{"/w/a\u200eb", `"/w/a\u200eb"`},
		{"/w/a\u061cb", `"/w/a\u061cb"`},
		{"/w/\xff", `"/w/\xff"`},
		// Go prints these as they are: a Hangul filler (drawn blank),
		// a zero-width space, a tag character (found by a tester).
		{"origin\u3164main\u200b", `"origin\u3164main\u200b"`},
		{"x\U000e0041y", `"x\U000e0041y"`},
	} {
		got := shown(tt.in)
		if got != tt.want {
			t.Errorf("shown(%q) = %s, want %s", tt.in, got, tt.want)
		}
		if strings.ContainsAny(got, "\x1b\r\u202e\u2066\u200f\u200e\u061c\u3164\u200b\U000e0041") {
			t.Errorf("shown(%q) keeps a control character: %q", tt.in, got)
		}
	}
	if got, want := quotedWords([]string{"git", "push", "-o", "\u3164\u3164", "--force"}), `["git" "push" "-o" "\u3164\u3164" "--force"]`; got != want {
		t.Errorf("quotedWords = %s, want %s", got, want)
	}
}
