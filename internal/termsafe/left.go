package termsafe

import "strconv"

// left is the terminal state a command's output set that outlives the
// command and changes what is written after it, moat's messages and a
// question among them: a scroll region in which a question scrolls out of
// sight, the alternate screen, default colours that hide text, mouse
// reporting and keyboard modes that garble what the person types. Close
// undoes what is still set (undo), and only that: an undo of what was
// never set can move the cursor (leaving an alternate screen restores a
// saved cursor) or reset what the person's own shell set.
//
// Origin mode is not undone: resetting it moves the cursor home, and with
// the margins reset it has no effect.
type left struct {
	modes     map[int]bool // DEC private modes set (CSI ? n h) and not reset since
	margins   bool         // a scroll region (DECSTBM) or left and right margins
	keypad    bool         // the application keypad (ESC =)
	kitty     int          // kitty keyboard flags pushed (CSI > n u) less those popped
	kittySet  bool         // kitty keyboard flags set in place (CSI = n u)
	newline   bool         // ANSI newline mode (LNM, CSI 20 h): Enter sends CR LF
	tabs      bool         // tab stops set or cleared (HTS, TBC)
	cursor    bool         // a cursor style (DECSCUSR, CSI n SP q) other than the default
	otherKeys uint8        // xterm's key modifier resources set (CSI > n m), by n
	colors    uint32       // OSC 4, 5 and 10 to 19 passed, by number
}

// trackedModes are the DEC private modes left undoes: what they change is
// where text goes, how it shows, what the keyboard and mouse send, or
// whether the screen is drawn at all (synchronized output). Each is reset
// by default but auto-repeat (8), which is set.
var trackedModes = map[int]bool{
	1: true, 5: true, 6: true, 8: true, 9: true, 47: true, 66: true, 69: true,
	1000: true, 1001: true, 1002: true, 1003: true, 1004: true, 1005: true, 1006: true,
	1015: true, 1016: true, 1036: true, 1047: true, 1049: true, 2004: true, 2026: true, 7727: true,
}

// modeOn are the tracked modes set by default.
var modeOn = map[int]bool{8: true}

// csi notes what a CSI passed to the terminal sets; h is its graphic
// bytes, the final one last.
func (l *left) csi(h []byte) {
	final := h[len(h)-1]
	body := h[:len(h)-1]
	var private byte
	if len(body) > 0 && body[0] >= '<' && body[0] <= '?' {
		private, body = body[0], body[1:]
	}
	if private == 0 && final == 'q' && len(body) > 0 && body[len(body)-1] == ' ' {
		// DECSCUSR: 0 (or none) is the terminal's default style.
		ps := params(body[:len(body)-1])
		l.cursor = len(ps) > 0 && ps[0] > 0
		return
	}
	for _, c := range body {
		if c >= 0x20 && c <= 0x2f {
			return // an intermediate: another sequence (DECSTR…)
		}
	}
	switch {
	case private == '?' && (final == 'h' || final == 'l'):
		for _, n := range params(body) {
			if trackedModes[n] {
				if l.modes == nil {
					l.modes = map[int]bool{}
				}
				l.modes[n] = final == 'h'
			}
		}
	case private == 0 && (final == 'h' || final == 'l'):
		for _, n := range params(body) {
			if n == 20 {
				l.newline = final == 'h'
			}
		}
	case private == 0 && final == 'g':
		l.tabs = true
	case private == '?' && final == 'W':
		for _, n := range params(body) {
			if n == 5 {
				l.tabs = false // DECST8C, what undo writes
			}
		}
	case private == 0 && final == 'r':
		// CSI r alone resets the region (what undo writes).
		l.margins = len(body) > 0
	case private == '>' && final == 'u':
		if l.kitty < 1<<16 {
			l.kitty++
		}
	case private == '<' && final == 'u':
		n := 1
		if ps := params(body); len(ps) > 0 && ps[0] > 0 {
			n = ps[0]
		}
		l.kitty = max(l.kitty-n, 0)
	case private == '=' && final == 'u':
		ps := params(body)
		l.kittySet = len(ps) > 0 && ps[0] > 0
	case private == '>' && final == 'm':
		// CSI > n m alone resets resource n (what undo writes); with a
		// value it sets it.
		ps := params(body)
		if len(ps) == 0 {
			ps = []int{0}
		}
		if ps[0] >= 0 && ps[0] < 8 {
			if len(ps) > 1 {
				l.otherKeys |= 1 << ps[0]
			} else {
				l.otherKeys &^= 1 << ps[0]
			}
		}
	}
}

// params reads a CSI's numeric parameters; an empty or odd one is -1.
func params(b []byte) []int {
	var out []int
	start := 0
	for i := 0; i <= len(b); i++ {
		if i < len(b) && b[i] != ';' && b[i] != ':' {
			continue
		}
		n, err := strconv.Atoi(string(b[start:i]))
		if err != nil || i == start {
			n = -1
		}
		out = append(out, n)
		start = i + 1
		if len(out) >= 32 {
			break
		}
	}
	return out
}

// esc notes an ESC with a final byte passed to the terminal.
func (l *left) esc(b byte) {
	switch b {
	case '=':
		l.keypad = true
	case '>':
		l.keypad = false
	case 'c': // a full reset: nothing is left set
		*l = left{}
	}
}

// osc notes an OSC passed to the terminal, by number: 100 more resets
// what the number sets (what undo writes).
func (l *left) osc(n int) {
	switch {
	case n == 4, n == 5, n >= 10 && n <= 19:
		l.colors |= 1 << n
	case n == 104, n == 105, n >= 110 && n <= 119:
		l.colors &^= 1 << (n - 100)
	}
}

// undo appends what ends the state still set and forgets it. The
// alternate screen goes first: leaving it restores the main screen's
// cursor, and the margins are reset around a saved cursor, as the
// programs that set them do, so that the cursor stays where it is.
func (l *left) undo(out []byte) []byte {
	for _, n := range []int{1049, 1047, 47} {
		if l.modes[n] {
			out = append(out, "\x1b[?"...)
			out = strconv.AppendInt(out, int64(n), 10)
			out = append(out, 'l')
			break
		}
	}
	if l.margins || l.modes[69] {
		out = append(out, "\x1b7\x1b[?69l\x1b[r\x1b8"...)
	}
	for _, n := range []int{1, 5, 6, 8, 9, 66, 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1015, 1016, 1036, 2004, 2026, 7727} {
		if on, ok := l.modes[n]; ok && on != modeOn[n] {
			out = append(out, "\x1b[?"...)
			out = strconv.AppendInt(out, int64(n), 10)
			if modeOn[n] {
				out = append(out, 'h')
			} else {
				out = append(out, 'l')
			}
		}
	}
	if l.newline {
		out = append(out, "\x1b[20l"...)
	}
	if l.cursor {
		out = append(out, "\x1b[0 q"...)
	}
	if l.tabs {
		// DECST8C: a stop every eight columns, the default.
		out = append(out, "\x1b[?5W"...)
	}
	if l.keypad {
		out = append(out, "\x1b>"...)
	}
	if l.kitty > 0 {
		out = append(out, "\x1b[<"...)
		out = strconv.AppendInt(out, int64(l.kitty), 10)
		out = append(out, 'u')
	}
	if l.kittySet {
		out = append(out, "\x1b[=0;1u"...)
	}
	for n := range 8 {
		if l.otherKeys&(1<<n) != 0 {
			out = append(out, "\x1b[>"...)
			out = strconv.AppendInt(out, int64(n), 10)
			out = append(out, 'm')
		}
	}
	for n := range 20 {
		if l.colors&(1<<n) != 0 {
			out = append(out, "\x1b]"...)
			out = strconv.AppendInt(out, int64(100+n), 10)
			out = append(out, "\x1b\\"...)
		}
	}
	*l = left{}
	return out
}
