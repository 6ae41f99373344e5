// Package termsafe filters what a sandboxed command writes to a person's
// terminal: it passes text and the control sequences that programs use to
// draw (cursor movement, colours, the title, hyperlinks, the alternate
// screen, sixel images) and drops those by which output reaches beyond the
// screen: writing or reading the clipboard (OSC 52 and its kin), the
// emulator's file transfers, logs and fonts (iTerm2's OSC 1337, kitty's
// file transfer, xterm's OSC 46 and 50), application program commands
// (kitty's graphics protocol reads files of the host by name), a
// multiplexer's passthrough (tmux's), and the title reports whose answer
// a shell would read as typed input once moat has exited.
//
// It owns the parser and nothing else: which writers are terminals and
// where the drops are reported are its callers' (the backends' relays,
// the client's copy of a session's output). The parser follows the DEC
// ANSI parser that terminals implement (vt100.net), so that where the
// filter sees a sequence begin and end the terminal does too: an ESC or a
// C1 control ends any string, CAN and SUB cancel a sequence, and C1
// controls are recognised in their UTF-8 form (U+0080 to U+009F, as xterm
// reads them) and as lone 8-bit bytes. Bytes it holds back to decide (a
// sequence's head) are written with what follows them in one Write, so
// that a sequence it passes reaches the terminal whole even when another
// writer shares it.
//
// No library does this: terminal libraries parse input or render output,
// and the sanitisers that exist strip every control sequence, which would
// break the full-screen programs a person runs in a sandbox.
package termsafe

import (
	"io"
	"os"
	"sort"
	"strconv"
	"sync"
)

// Drop counts the sequences of one kind the filter dropped.
type Drop struct {
	What  string // e.g. "OSC 52 (clipboard)"
	Count int
}

// Writer is an io.Writer that passes what is written to the writer under
// it with the dangerous control sequences removed. It is safe for
// concurrent use: one parser sees each Write whole.
type Writer struct {
	w  io.Writer
	wm sync.Mutex // held by Write and Close

	state   state
	head    []byte // the bytes of the sequence being decided
	cont    int    // UTF-8 continuation bytes expected
	lead    bool   // a 0xC2 byte is held: the next may make a C1 control
	kind    string // the string being dropped or passed
	escHeld bool   // an ESC is held (in a string: the first byte of ST?)

	out []byte

	mu      sync.Mutex
	dropped map[string]int
}

type state int

const (
	ground   state = iota
	escape         // after ESC
	escInter       // ESC, intermediates (ESC ( B ...)
	csi            // a CSI, held until its final byte
	csiDrop        // a CSI too long to hold: dropped
	strHead        // an OSC or DCS whose head is held
	strPass        // a string being passed until its end
	strDrop        // a string being dropped until its end
)

// maxHead bounds what the filter holds of a string's head before it
// decides, maxCSI what it holds of a CSI.
const (
	maxHead = 64
	maxCSI  = 256
)

// New returns a Writer that filters into w.
func New(w io.Writer) *Writer {
	return &Writer{w: w, dropped: map[string]int{}}
}

// terminalUnder returns the terminal w writes to, directly or through
// writers with an Unwrap method, or nil.
func terminalUnder(w io.Writer) *os.File {
	for range 16 {
		switch x := w.(type) {
		case *os.File:
			if x != nil && isTerminal(x) {
				return x
			}
			return nil
		case interface{ Unwrap() io.Writer }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

// Write filters p into the writer under it. It returns len(p) when the
// write under it succeeds, whatever it dropped.
func (t *Writer) Write(p []byte) (int, error) {
	t.wm.Lock()
	defer t.wm.Unlock()
	t.out = t.out[:0]
	for _, b := range p {
		t.byte(b)
	}
	if len(t.out) > 0 {
		if _, err := t.w.Write(t.out); err != nil {
			return 0, err
		}
	}
	if cap(t.out) > 64*1024 {
		t.out = nil
	}
	return len(p), nil
}

// Close ends a string the filter passed and the command left open, so
// that the terminal does not take what is written after the command's
// output (moat's report, the shell's prompt) as part of it, and drops
// what it held undecided. It does not close the writer under it.
func (t *Writer) Close() error {
	t.wm.Lock()
	defer t.wm.Unlock()
	t.out = t.out[:0]
	if t.lead {
		t.out = append(t.out, 0xc2) // a broken character, no control
	}
	if t.state == strPass {
		t.out = append(t.out, 0x1b, '\\')
	}
	t.head, t.state, t.escHeld, t.lead, t.cont = nil, ground, false, false, 0
	if len(t.out) > 0 {
		_, err := t.w.Write(t.out)
		return err
	}
	return nil
}

// Set filters the terminals among the writers of one command's outputs,
// one Writer for each terminal however many streams write to it.
type Set struct {
	mu    sync.Mutex
	files []*os.File
	ws    []*Writer
}

// Wrap returns w filtered when it is a terminal, or writes to one through
// writers that say what they write to (an Unwrap method returning the
// writer under them), else w itself.
func (s *Set) Wrap(w io.Writer) io.Writer {
	f := terminalUnder(w)
	if f == nil {
		return w
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := f.Stat()
	for i, g := range s.files {
		if g == f {
			return s.ws[i]
		}
		if gi, err2 := g.Stat(); err == nil && err2 == nil && os.SameFile(fi, gi) {
			return s.ws[i]
		}
	}
	tw := New(w)
	s.files, s.ws = append(s.files, f), append(s.ws, tw)
	return tw
}

// Close closes every Writer of the set (see Writer.Close), once the
// outputs are done, and returns what they dropped.
func (s *Set) Close() []Drop {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Drop
	for _, w := range s.ws {
		w.Close()
		out = append(out, w.Dropped()...)
	}
	s.files, s.ws = nil, nil
	return out
}

// Dropped lists what was dropped, by kind, in a stable order.
func (t *Writer) Dropped() []Drop {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Drop, 0, len(t.dropped))
	for k, n := range t.dropped {
		out = append(out, Drop{What: k, Count: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].What < out[j].What })
	return out
}

func (t *Writer) drop(kind string) {
	t.mu.Lock()
	t.dropped[kind]++
	t.mu.Unlock()
}

// byte feeds one byte of the command's output to the parser.
func (t *Writer) byte(b byte) {
	// A held 0xC2 and this byte may be a C1 control in UTF-8.
	if t.lead {
		t.lead = false
		if b >= 0x80 && b <= 0x9f {
			t.control(b, []byte{0xc2, b})
			return
		}
		t.plain(0xc2)
		// b is then read as it comes (a continuation, or anything else).
	}
	if t.escHeld {
		t.escHeld = false
		t.afterEsc(b)
		return
	}
	switch {
	case b == 0x1b:
		t.escHeld, t.cont = true, 0 // an ESC interrupts a character
		return
	case b == 0x18 || b == 0x1a: // CAN, SUB: the sequence is cancelled
		t.cancel()
		t.out = append(t.out, b)
		t.cont = 0
		return
	case b == 0xc2 && t.cont == 0:
		t.lead = true
		return
	case b >= 0x80 && b <= 0x9f && t.cont == 0:
		// A lone 8-bit C1 control, as a terminal not reading UTF-8
		// takes it.
		t.control(b, []byte{b})
		return
	}
	t.utf8(b)
	t.plain(b)
}

// utf8 keeps count of the continuation bytes a character still needs, so
// that a continuation byte is not taken for a C1 control.
func (t *Writer) utf8(b byte) {
	switch {
	case b < 0x80:
		t.cont = 0
	case b < 0xc0:
		if t.cont > 0 {
			t.cont--
		}
	case b < 0xe0:
		t.cont = 1
	case b < 0xf0:
		t.cont = 2
	case b < 0xf8:
		t.cont = 3
	default:
		t.cont = 0
	}
}

// afterEsc reads the byte after an ESC: ST ends a string; any other ends
// it too and begins a sequence.
func (t *Writer) afterEsc(b byte) {
	if b == '\\' {
		t.st([]byte{0x1b, '\\'})
		return
	}
	if b == 0x1b {
		// ESC ESC: the first is abandoned, as the terminal abandons it;
		// written alone it would make an ESC of the next byte written.
		t.endString()
		t.escHeld = true
		return
	}
	if b == 0x18 || b == 0x1a {
		t.endString()
		t.state = ground
		t.out = append(t.out, b)
		return
	}
	if b >= 0x40 && b <= 0x5f {
		// The 7-bit form of a C1 control.
		t.control(b+0x40, []byte{0x1b, b})
		return
	}
	t.endString()
	t.cont = 0
	if b >= 0x20 && b <= 0x2f {
		t.state = escInter
	} else {
		t.state = ground
	}
	t.out = append(t.out, 0x1b, b)
}

// control handles a C1 control (0x80 to 0x9f), from raw, its bytes.
func (t *Writer) control(c byte, raw []byte) {
	t.cont = 0
	switch c {
	case 0x9c: // ST
		t.st(raw)
		return
	case 0x9b: // CSI
		t.endString()
		t.state, t.head = csi, append(t.head[:0], raw...)
	case 0x9d: // OSC
		t.endString()
		t.state, t.kind, t.head = strHead, "OSC", append(t.head[:0], raw...)
	case 0x90: // DCS
		t.endString()
		t.state, t.kind, t.head = strHead, "DCS", append(t.head[:0], raw...)
	case 0x98, 0x9e, 0x9f: // SOS, PM, APC: nothing a program needs draws with them
		t.endString()
		t.state, t.kind = strDrop, map[byte]string{0x98: "SOS", 0x9e: "PM", 0x9f: "APC"}[c]
		t.drop(t.kind + " (application commands: kitty's graphics read files of the host)")
	default:
		// IND, NEL, RI and the like act on the screen alone.
		t.endString()
		t.state = ground
		t.out = append(t.out, raw...)
	}
}

// st is a string terminator from raw.
func (t *Writer) st(raw []byte) {
	switch t.state {
	case strPass:
		t.out = append(t.out, raw...)
	case strHead:
		t.decide(true)
		if t.state == strPass {
			t.out = append(t.out, raw...)
		}
	case strDrop:
	default:
		t.endString()
		t.out = append(t.out, raw...)
	}
	t.state = ground
}

// endString ends what the parser was in when an ESC or a C1 control
// begins something else, as the terminal ends it. A head still held is
// dropped, not written: the terminal would abandon it too, and written
// it would join with whatever is written next (ESC [ 2 1, a dropped
// sequence, then t).
//
// A string the filter passed is ended with ST: what ends it may be
// dropped, and the terminal would otherwise stay in the string.
func (t *Writer) endString() {
	if t.state == strPass {
		t.out = append(t.out, 0x1b, '\\')
	}
	t.head = t.head[:0]
	t.state = ground
}

// cancel is CAN or SUB: the sequence is abandoned.
func (t *Writer) cancel() { t.endString() }

func (t *Writer) emit(b []byte) { t.out = append(t.out, b...) }

// plain is a byte that neither begins nor ends a sequence.
func (t *Writer) plain(b byte) {
	switch t.state {
	case ground:
		t.out = append(t.out, b)
	case escInter:
		t.out = append(t.out, b)
		if b >= 0x30 && b <= 0x7e {
			t.state = ground
		}
	case csi:
		if b < 0x20 {
			// The terminal acts on a C0 control inside a CSI at once,
			// and on the CSI at its final byte: so does the filter.
			t.out = append(t.out, b)
			return
		}
		t.head = append(t.head, b)
		if b >= 0x40 && b <= 0x7e {
			t.finishCSI()
		} else if len(t.head) > maxCSI {
			// No program draws with a CSI this long.
			t.drop("CSI longer than " + strconv.Itoa(maxCSI) + " bytes")
			t.head, t.state = t.head[:0], csiDrop
		}
	case csiDrop:
		if b >= 0x40 && b <= 0x7e {
			t.state = ground
		}
	case strHead:
		if b == 0x07 && t.kind == "OSC" { // BEL ends an OSC
			t.decide(true)
			if t.state == strPass {
				t.out = append(t.out, b)
			}
			t.state = ground
			return
		}
		t.head = append(t.head, b)
		if t.decide(false) {
			return
		}
		if len(t.head) > maxHead {
			t.decide(true)
		}
	case strPass:
		t.out = append(t.out, b)
		if b == 0x07 && t.kind == "OSC" {
			t.state = ground
		}
	case strDrop:
		if b == 0x07 && t.kind == "OSC" {
			t.state = ground
		}
	}
}

// finishCSI decides a CSI held whole.
func (t *Writer) finishCSI() {
	h := t.head
	t.state = ground
	// The parameters follow the introducer (ESC [ or its C1 form).
	params := h[1:]
	if h[0] == 0x1b || h[0] == 0xc2 {
		params = h[2:]
	}
	params = graphic(params)
	if len(params) > 0 && params[len(params)-1] == 't' {
		p := params[:len(params)-1]
		for i, c := range p {
			if c == ';' || c == ':' {
				p = p[:i]
				break
			}
		}
		if n, err := strconv.Atoi(string(p)); err == nil && len(p) > 0 && p[0] >= '0' && p[0] <= '9' && (n == 20 || n == 21) {
			t.drop("CSI " + strconv.Itoa(n) + " t (a title report, read as typed input)")
			t.head = t.head[:0]
			return
		}
	}
	t.emit(h)
	t.head = t.head[:0]
}

// decide settles a string whose head is held: pass it (its head is
// written) or drop it. With final set the head is all there is of it
// (its end came, or enough of it to decide); otherwise decide reports
// false while the head is too short to tell.
func (t *Writer) decide(final bool) bool {
	h := t.head[1:]
	if t.head[0] == 0x1b || t.head[0] == 0xc2 {
		h = t.head[2:]
	}
	// Terminals skip controls and DEL inside a sequence's head; so does
	// the decision (the bytes written are the head as it came).
	h = graphic(h)
	var pass bool
	var why string
	switch t.kind {
	case "OSC":
		i := indexByte(h, ';')
		if i < 0 && !final {
			return false
		}
		num := h
		if i >= 0 {
			num = h[:i]
		}
		pass, why = oscAllowed(string(num))
	case "DCS":
		const tmux = "tmux;"
		if len(h) < len(tmux) && !final && string(h) == tmux[:len(h)] {
			return false
		}
		pass = len(h) < len(tmux) || string(h[:len(tmux)]) != tmux
		why = "DCS tmux; (a multiplexer's passthrough to the terminal)"
	}
	if pass {
		t.state = strPass
		t.emit(t.head)
	} else {
		t.state = strDrop
		t.drop(why)
	}
	t.head = t.head[:0]
	return true
}

// oscAllowed says whether an OSC of this number draws or marks the screen
// only: the title, colours, the working directory, hyperlinks, a prompt's
// marks, notifications.
func oscAllowed(num string) (bool, string) {
	n, err := strconv.Atoi(num)
	if err != nil || num == "" || num[0] == '+' || num[0] == '-' {
		return false, "OSC " + quoteHead(num) + " (not a numbered command moat passes)"
	}
	switch {
	case n <= 2, n == 4, n == 5, n == 7, n == 8, n == 9,
		n >= 10 && n <= 19, n == 22, n == 99, n == 104, n == 105,
		n >= 110 && n <= 119, n == 133, n == 633, n == 777:
		return true, ""
	case n == 52 || n == 5522:
		return false, "OSC " + num + " (clipboard)"
	case n == 1337:
		return false, "OSC 1337 (iTerm2's commands: file transfers among them)"
	case n == 5113:
		return false, "OSC 5113 (kitty's file transfer)"
	case n == 46:
		return false, "OSC 46 (xterm's log file)"
	case n == 50:
		return false, "OSC 50 (xterm's font)"
	}
	return false, "OSC " + num + " (not one moat passes)"
}

// quoteHead shows an OSC's head that is no number, briefly.
func quoteHead(s string) string {
	if len(s) > 12 {
		s = s[:12]
	}
	return strconv.Quote(s)
}

// graphic returns b without its C0 controls and DEL.
func graphic(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c >= 0x20 && c != 0x7f {
			out = append(out, c)
		}
	}
	return out
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
