package termsafe

// JSONControls returns b, JSON text, with the controls encoding/json
// leaves as they are written as escapes: DEL and U+0080 to U+009F, which
// a terminal that shows the JSON would act on (U+009D begins an OSC: a
// clipboard write in a command line an audit record quotes, found by a
// tester). They stand only inside strings, where the escape means the
// same character. b is returned as it is when it has none.
func JSONControls(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] != 0x7f && (b[i] != 0xc2 || i+1 >= len(b) || b[i+1] < 0x80 || b[i+1] > 0x9f) {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	const hex = "0123456789abcdef"
	for ; i < len(b); i++ {
		switch {
		case b[i] == 0x7f:
			out = append(out, `\u007f`...)
		case b[i] == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f:
			out = append(out, '\\', 'u', '0', '0', hex[b[i+1]>>4], hex[b[i+1]&0xf])
			i++
		default:
			out = append(out, b[i])
		}
	}
	return out
}
