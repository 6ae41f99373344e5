package termsafe

import "unicode/utf8"

// JSONControls returns b, JSON text, with the characters encoding/json
// leaves as they are and a terminal showing the JSON would act on
// written as escapes: DEL and U+0080 to U+009F (U+009D begins an OSC: a
// clipboard write in a command line an audit record quotes, found by a
// tester), and the bidirectional formatting characters, which reorder
// what the terminal shows (a name in a diff's JSON read backwards). They
// stand only inside strings, where the escape means the same character.
// b is returned as it is when it has none.
func JSONControls(b []byte) []byte {
	i := 0
	for i < len(b) && escapedLen(b[i:]) == 0 {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	const hex = "0123456789abcdef"
	for i < len(b) {
		n := escapedLen(b[i:])
		if n == 0 {
			out = append(out, b[i])
			i++
			continue
		}
		r, _ := utf8.DecodeRune(b[i : i+n])
		if n == 1 {
			r = rune(b[i])
		}
		out = append(out, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		i += n
	}
	return out
}

// escapedLen is the length of the character at the start of b when
// JSONControls escapes it, else 0.
func escapedLen(b []byte) int {
	switch b[0] {
	case 0x7f:
		return 1
	case 0xc2, 0xd8, 0xe2:
	default:
		return 0
	}
	r, n := utf8.DecodeRune(b)
	switch {
	case r >= 0x80 && r <= 0x9f, r == 0x061c, r == 0x200e, r == 0x200f,
		r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return n
	}
	return 0
}
