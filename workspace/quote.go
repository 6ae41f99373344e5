package workspace

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/moatbox/moat/internal/termsafe"
)

// A change set is written by the command under review, so every name and
// every line of it is hostile text: a carriage return or an escape
// sequence in a file name or a line could paint over what a reviewer's
// terminal already shows. What this package writes for a person passes
// through QuoteName (names) or EscapeText (free text), and file content
// through escapeLine.

// QuoteName is how review output names a path, exactly as git does with
// core.quotePath on (its default): unchanged when it holds only printable
// ASCII other than '"' and '\', else in double quotes with C escapes
// (\t, \n, \r, \a, \b, \f, \v, \" and \\) and every other byte outside
// printable ASCII in octal ("\033", "\303\251"). Patches keep git's rules
// so that `git apply` reads the names back byte for byte.
func QuoteName(p string) string {
	needs := false
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			needs = true
			break
		}
	}
	if !needs {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case cEscape[c] != 0:
			b.WriteByte('\\')
			b.WriteByte(cEscape[c])
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// cEscape holds the one-letter C escapes git's quoting uses.
var cEscape = [256]byte{'\a': 'a', '\b': 'b', '\t': 't', '\n': 'n', '\v': 'v', '\f': 'f', '\r': 'r'}

// EscapeText makes free text (a recorded command, a message that may
// quote a name) safe to print: printable characters, UTF-8 included,
// stay as they are, and anything a terminal would act on is written as
// an escape: \t, \n, \r, \xNN for other C0 controls, DEL and bytes that
// are not UTF-8, \uNNNN for C1 controls and the bidirectional controls
// that reorder what is displayed. Backslashes are left alone: the result
// is for reading, not for parsing back.
func EscapeText(s string) string {
	out, _ := escape(s, false)
	return out
}

// EscapeMessage escapes a message of moat's that may span lines (a
// refusal lists what is missing, one item a line) as EscapeText does,
// except that a line end stays one where moat's messages put them: before
// an indented line ("  ") or a parenthesised note ("("). Any other is
// escaped, so that a line end in a name the message quotes raw (one a
// command made) cannot start a line that reads as moat's own ("moat:
// ..."); such a name should come quoted (QuoteName) all the same.
func EscapeMessage(s string) string {
	if !strings.Contains(s, "\n") {
		return EscapeText(s)
	}
	lines := strings.Split(s, "\n")
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			if strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "(") {
				b.WriteByte('\n')
			} else {
				b.WriteString(`\n`)
			}
		}
		b.WriteString(EscapeText(l))
	}
	return b.String()
}

// escapeLine escapes one line of file content as EscapeText does, but
// keeps tabs and the line's end ("\n", or "\r\n", which overwrites
// nothing), and reports whether it escaped anything.
func escapeLine(line string) (string, bool) {
	end := ""
	for _, e := range []string{"\r\n", "\n"} {
		if strings.HasSuffix(line, e) {
			line, end = strings.TrimSuffix(line, e), e
			break
		}
	}
	out, changed := escape(line, true)
	return out + end, changed
}

func escape(s string, keepTab bool) (string, bool) {
	clean := true
	prev := rune(-1)
	for _, r := range s {
		if MustEscape(r) && !(keepTab && r == '\t') || straySelector(prev, r) {
			clean = false
			break
		}
		prev = r
	}
	if clean {
		return s, false
	}
	var b strings.Builder
	prev = -1
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		stray := straySelector(prev, r)
		prev = r
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case stray:
			fmt.Fprintf(&b, `\u%04x`, r)
		case keepTab && r == '\t', !MustEscape(r):
			b.WriteString(s[i : i+n])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String(), true
}

// straySelector reports whether r is a variation selector (U+FE00 to
// U+FE0F) that follows no character it could modify: after another
// selector, a joiner, a letter or a space, a control, or first (a
// keycap's digit, # and *, symbols, emoji and CJK take them). One after a character is an
// emoji's or a CJK variant's, and shows; a run of them shows as nothing,
// and carries four bits each (how GlassWorm hid its code).
func straySelector(prev, r rune) bool {
	if r < 0xfe00 || r > 0xfe0f {
		return false
	}
	switch {
	case prev >= '0' && prev <= '9', prev == '#', prev == '*':
		return false // a keycap's
	case prev < 0x2000:
		// ASCII and the alphabets take none: one after a letter hides
		// four bits a character of text.
		return true
	}
	return prev >= 0xfe00 && prev <= 0xfe0f || prev == 0x200c || prev == 0x200d || MustEscape(prev)
}

// MustEscape reports whether r is to be escaped before it is shown: C0
// and C1 controls, DEL, the line and paragraph separators (JavaScript
// ends a line at each, where a terminal shows none), the bidirectional
// formatting characters (they reorder what a terminal displays, as in
// "Trojan Source"), the
// replacement character that stands for a byte that is not UTF-8, and
// the characters a terminal shows as nothing, which carry text a
// reviewer does not see and a model reads (Unicode's tag characters,
// "ASCII smuggling"; zero-width spaces and joiners of words, the soft
// hyphen, fillers, the Braille blank, the supplementary variation
// selectors). The zero-width
// non-joiner and joiner, and the variation selectors of emoji, are
// left as they are: ordinary Persian, Indic and emoji text is full of
// them (EscapeText escapes a selector that follows no character it could
// modify). The questions moat asks (cmd/moat, mcpserver) share it with
// EscapeText.
func MustEscape(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x2028 && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r < 0xad:
		return false
	case r == 0xad, r == 0x034f, r == 0x115f, r == 0x1160, r == 0x17b4, r == 0x17b5, r >= 0x180b && r <= 0x180f,
		r == 0x200b, r >= 0x2060 && r <= 0x206f, r == 0x2800, r == 0x3164,
		r == 0xfeff, r == 0xffa0, r >= 0xfff0 && r <= 0xfffb, r >= 0x1bca0 && r <= 0x1bca3,
		r >= 0x1d173 && r <= 0x1d17a, r >= 0xe0000 && r <= 0xe0fff:
		return true
	}
	return r == utf8.RuneError
}

// JSONControls returns b, JSON text, with the controls encoding/json
// leaves as they are written as escapes (see termsafe.JSONControls).
func JSONControls(b []byte) []byte { return termsafe.JSONControls(b) }
