// Package termsafe filters what a sandboxed command writes to a person's
// terminal: it passes text and the control sequences that programs use to
// draw (cursor movement, colours, the title, hyperlinks, the alternate
// screen, sixel images) and drops those by which output reaches beyond the
// screen: writing or reading the clipboard (OSC 52 and its kin), the
// emulator's file transfers, logs and fonts (iTerm2's OSC 1337, kitty's
// file transfer, xterm's OSC 46 and 50), application program commands
// (kitty's graphics protocol reads files of the host by name), device
// control strings but the few that draw or ask (a multiplexer's
// passthrough, kitty's remote control and xterm's key definitions are
// among the rest), and the title reports whose answer a shell would read
// as typed input once moat has exited.
//
// It owns the parser and nothing else: which writers are terminals and
// where the drops are reported are its callers' (the backends' relays,
// the client's copy of a session's output). The parser follows the DEC
// ANSI parser that terminals implement (vt100.net) and reads UTF-8 as a
// strict decoder does, so that where the filter sees a sequence begin and
// end the terminal does too: an ESC or a C1 control ends any string, CAN
// and SUB cancel a sequence, C1 controls are recognised in their UTF-8
// form (U+0080 to U+009F, as xterm reads them) and as bytes that are no
// part of a character, and a byte that breaks a character is read afresh.
// What it passes of a sequence it decides on (an OSC's number, a DCS's
// kind) it writes rebuilt from what it decided, never as the bytes came,
// and whole, in one Write, so that a sequence reaches the terminal as
// decided even when other writers share it.
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
	"unicode/utf8"
)

// Rule and Hint are what a report says of every drop: why, and how to
// see what was dropped (the backends' denials and the client's share
// them).
const (
	Rule = "output to a terminal keeps to the control sequences that draw on its screen"
	Hint = "output that is not a terminal is passed as written: pipe it (| cat -v) to see the sequences"
)

// Drop counts the sequences of one kind the filter dropped.
type Drop struct {
	What  string // e.g. "OSC 52 (clipboard)"
	Count int
}

// Writer is an io.Writer that passes what is written to the writer under
// it with the dangerous control sequences removed. It is safe for
// concurrent use.
type Writer struct {
	p *parser
	w io.Writer
}

// parser is the state of one terminal's stream, which every Writer to
// that terminal shares (see Set).
type parser struct {
	mu sync.Mutex // held by Write and Close

	state   state
	head    []byte // what a sequence being decided holds (its graphic bytes)
	kind    string // the string being passed or dropped: OSC, DCS, APC…
	escHeld bool   // an ESC is held: the next byte decides what it begins
	c2Held  bool   // a 0xC2 is held: with the next byte it may be a C1 control
	need    int    // UTF-8 continuation bytes the character still needs
	lo, hi  byte   // the range the next continuation byte must be in
	char    []byte // a character of a passed OSC, held until it is whole
	saw     bool   // a control sequence or a shift was passed
	left    left   // what the passed sequences set that outlives the command
	last    io.Writer

	out []byte

	dmu     sync.Mutex
	dropped map[string]int
}

type state int

const (
	ground   state = iota
	escInter       // ESC, intermediates (ESC ( B …)
	csi            // a CSI, held until its final byte
	csiDrop        // a CSI being dropped until its final byte
	oscHead        // an OSC whose number is being read
	dcsHead        // a DCS whose kind is being read
	strPass        // a string being passed until its end
	strDrop        // a string being dropped until its end
)

// maxHead bounds what the filter holds of a sequence before it decides:
// no program draws with a longer one.
const maxHead = 256

// resetRendering ends, after a command that wrote control sequences, what
// it may have left set that would hide or garble what is written next
// (moat's report): attributes, a line-drawing character set, insert mode,
// no line wrap, a hidden cursor. It comes after what left undoes.
const resetRendering = "\x1b[0m\x1b(B\x0f\x1b[4l\x1b[?7h\x1b[?25h"

// New returns a Writer that filters into w.
func New(w io.Writer) *Writer {
	return &Writer{p: newParser(), w: w}
}

func newParser() *parser {
	return &parser{dropped: map[string]int{}, lo: 0x80, hi: 0xbf}
}

// Set filters the terminals among the writers of one command's outputs.
// The Writers to one terminal share one parser: what they write reaches
// it in the order written, and each sequence is decided as the terminal
// reads the whole of it. A terminal is told by its device; one that
// stands for another (/dev/tty, the console) joins the first.
type Set struct {
	mu    sync.Mutex
	by    map[uint64]*parser
	first *parser
	all   []*parser
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
	id := terminalID(f)
	var p *parser
	switch {
	case id == 0:
		p = s.first
	case s.by[id] != nil:
		p = s.by[id]
	case len(s.by) == 0:
		p = s.first // the first terminal by its own name joins one by an alias
	}
	if p == nil {
		p = newParser()
		s.all = append(s.all, p)
	}
	if id != 0 {
		if s.by == nil {
			s.by = map[uint64]*parser{}
		}
		s.by[id] = p
	}
	if s.first == nil {
		s.first = p
	}
	return &Writer{p: p, w: w}
}

// Close ends the set's output (see Writer.Close), once the outputs are
// done, and returns what was dropped.
func (s *Set) Close() []Drop {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := map[string]int{}
	for _, p := range s.all {
		p.close()
		for _, d := range p.drops() {
			sum[d.What] += d.Count
		}
	}
	s.by, s.first, s.all = nil, nil, nil
	out := make([]Drop, 0, len(sum))
	for k, n := range sum {
		out = append(out, Drop{What: k, Count: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].What < out[j].What })
	return out
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

// Write filters p into the writer under it. It returns len(b) when the
// write under it succeeds, whatever it dropped.
func (t *Writer) Write(b []byte) (int, error) {
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = t.w
	p.out = p.out[:0]
	for _, c := range b {
		p.byte(c)
	}
	if len(p.out) > 0 {
		if _, err := t.w.Write(p.out); err != nil {
			return 0, err
		}
	}
	if cap(p.out) > 64*1024 {
		p.out = nil
	}
	return len(b), nil
}

// Close ends a string the filter passed and the command left open, so
// that the terminal does not take what is written after the command's
// output (moat's report, the shell's prompt) as part of it, resets the
// rendering and undoes the modes the command left set (see left) if it
// wrote sequences, and drops what it held undecided. It does not close the writer under it.
func (t *Writer) Close() error {
	t.p.mu.Lock()
	t.p.last = t.w
	t.p.mu.Unlock()
	return t.p.close()
}

// Dropped lists what was dropped, by kind, in a stable order.
func (t *Writer) Dropped() []Drop { return t.p.drops() }

func (p *parser) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out = p.out[:0]
	if p.c2Held {
		p.c2Held = false
		p.plain(0xc2) // a broken character, no control
	}
	if p.state == strPass {
		p.out = append(p.out, 0x1b, '\\')
	}
	if p.saw {
		p.out = p.left.undo(p.out)
		p.out = append(p.out, resetRendering...)
	}
	p.head, p.char, p.state, p.escHeld, p.c2Held, p.need, p.saw = nil, nil, ground, false, false, 0, false
	if len(p.out) > 0 && p.last != nil {
		_, err := p.last.Write(p.out)
		return err
	}
	return nil
}

func (p *parser) drops() []Drop {
	p.dmu.Lock()
	defer p.dmu.Unlock()
	out := make([]Drop, 0, len(p.dropped))
	for k, n := range p.dropped {
		out = append(out, Drop{What: k, Count: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].What < out[j].What })
	return out
}

// maxKinds bounds the kinds of drop counted apart: a kind can name a
// number the command chose, and each is a map entry and a report's.
const maxKinds = 32

func (p *parser) drop(kind string) {
	p.dmu.Lock()
	if _, ok := p.dropped[kind]; !ok && len(p.dropped) >= maxKinds {
		kind = "other sequences (past " + strconv.Itoa(maxKinds) + " kinds)"
	}
	p.dropped[kind]++
	p.dmu.Unlock()
}

// byte feeds one byte of the command's output to the parser.
func (p *parser) byte(b byte) {
	if p.c2Held {
		p.c2Held = false
		switch {
		case b >= 0x80 && b <= 0x9f: // U+0080 to U+009F: a C1 control
			p.control(b, []byte{0xc2, b})
			return
		case b >= 0xa0 && b <= 0xbf: // U+00A0 to U+00BF
			p.need = 1
			p.plain(0xc2)
			p.need = 0
			p.plain(b)
			return
		}
		// A broken character: the terminal shows it as such and reads
		// b afresh.
		p.plain(0xc2)
	}
	if p.escHeld {
		p.escHeld = false
		p.afterEsc(b)
		return
	}
	switch {
	case b == 0x1b:
		p.escHeld, p.need = true, 0 // an ESC interrupts a character
	case b == 0x18 || b == 0x1a: // CAN, SUB: the sequence is cancelled
		p.cancel()
		p.need = 0
		p.out = append(p.out, b)
	case b < 0x80:
		p.need = 0
		p.plain(b)
	case b <= 0xbf:
		if p.need > 0 && b >= p.lo && b <= p.hi {
			p.need--
			p.lo, p.hi = 0x80, 0xbf
			p.plain(b)
			return
		}
		// No part of a character: a terminal reads it alone, and one
		// of 0x80 to 0x9f may take it as a C1 control.
		p.need = 0
		if b <= 0x9f {
			p.control(b, []byte{b})
			return
		}
		p.plain(b)
	case b == 0xc2:
		p.need = 0
		p.c2Held = true
	default:
		p.lead(b)
		p.plain(b)
	}
}

// lead starts a character at b (0xc3 and above), as a strict UTF-8
// decoder does: how many continuation bytes it needs, and the range of the
// first (no overlong form, no surrogate, nothing past U+10FFFF). 0xc0,
// 0xc1 and 0xf5 to 0xff start none.
func (p *parser) lead(b byte) {
	p.lo, p.hi = 0x80, 0xbf
	switch {
	case b >= 0xc3 && b <= 0xdf:
		p.need = 1
	case b == 0xe0:
		p.need, p.lo = 2, 0xa0
	case b == 0xed:
		p.need, p.hi = 2, 0x9f
	case b >= 0xe1 && b <= 0xef:
		p.need = 2
	case b == 0xf0:
		p.need, p.lo = 3, 0x90
	case b == 0xf4:
		p.need, p.hi = 3, 0x8f
	case b >= 0xf1 && b <= 0xf3:
		p.need = 3
	default:
		p.need = 0
	}
}

// afterEsc reads the byte after an ESC: ST ends a string; any other ends
// it too and begins a sequence.
func (p *parser) afterEsc(b byte) {
	switch {
	case b == '\\':
		p.st([]byte{0x1b, '\\'})
	case b == 0x1b:
		// ESC ESC: the first is abandoned, as the terminal abandons it;
		// written alone it would make an ESC of the next byte written.
		p.endString()
		p.escHeld = true
	case b == 0x18 || b == 0x1a:
		p.cancel()
		p.out = append(p.out, b)
	case b < 0x20:
		// A C0 control after an ESC is acted on, and the ESC still
		// waits for what it begins (a tester's ESC BEL ] 52 …): the
		// control is written, the ESC held.
		p.out = append(p.out, b)
		p.escHeld = true
	case b == 0x7f:
		p.escHeld = true // ignored there
	case b >= 0x40 && b <= 0x5f:
		// The 7-bit form of a C1 control.
		p.control(b+0x40, []byte{0x1b, b})
	case b >= 0x20 && b <= 0x2f:
		// An intermediate: held with what follows until the final byte.
		p.endString()
		p.state = escInter
		p.head = append(p.head[:0], b)
	case b >= 0x80:
		// No final byte: the terminal abandons the ESC, and reads b
		// afresh (one reading bytes as a C1 control: ESC 0x9d is an
		// OSC there). The ESC is not written: alone, it would make an
		// ESC of the next byte written.
		p.endString()
		p.byte(b)
	default:
		p.endString()
		p.passed()
		p.left.esc(b)
		p.out = append(p.out, 0x1b, b)
	}
}

// passed notes that a control sequence reached the terminal: the
// rendering is reset at the end.
func (p *parser) passed() { p.saw = true }

// control handles a C1 control (0x80 to 0x9f), from raw, its bytes.
func (p *parser) control(c byte, raw []byte) {
	p.need = 0
	switch c {
	case 0x9c: // ST
		p.st(raw)
	case 0x9b: // CSI
		p.endString()
		p.state = csi
	case 0x9d: // OSC
		p.endString()
		p.state, p.kind = oscHead, "OSC"
	case 0x90: // DCS
		p.endString()
		p.state, p.kind = dcsHead, "DCS"
	case 0x98, 0x9e, 0x9f: // SOS, PM, APC
		p.endString()
		p.state, p.kind = strDrop, map[byte]string{0x98: "SOS", 0x9e: "PM", 0x9f: "APC"}[c]
		p.drop(p.kind + " (application commands: kitty's graphics read files of the host)")
	default:
		// IND, NEL, RI and the like act on the screen alone; HTS sets
		// a tab stop, which outlives the command.
		p.endString()
		p.passed()
		if c == 0x88 {
			p.left.tabs = true
		}
		p.out = append(p.out, raw...)
	}
}

// st is a string terminator from raw.
func (p *parser) st(raw []byte) {
	// A string the filter passed ends with a 7-bit ST: a terminal
	// reading UTF-8 takes a lone 0x9c for a character and stays in the
	// string, where the filter would no longer be (a reviewer's DCS
	// through GNU screen).
	switch p.state {
	case strPass:
		p.char = p.char[:0]
		p.out = append(p.out, 0x1b, '\\')
	case oscHead:
		// The number ends with the string: an OSC of no parameter.
		if p.decideOSC(false) {
			p.out = append(p.out, 0x1b, '\\')
		}
	case strDrop, dcsHead:
		// A DCS whose kind never ended is no DCS moat passes.
	default:
		p.endString()
		p.out = append(p.out, raw...)
	}
	p.head, p.state = p.head[:0], ground
}

// endString ends what the parser was in when an ESC or a C1 control
// begins something else, as the terminal ends it. A head still held is
// dropped, not written: the terminal would abandon it too, and written it
// would join with whatever is written next. A string the filter passed is
// ended with ST: what ends it may be dropped, and the terminal would
// otherwise stay in the string.
func (p *parser) endString() {
	if p.state == strPass {
		p.out = append(p.out, 0x1b, '\\')
	}
	p.char = p.char[:0]
	p.head = p.head[:0]
	p.state = ground
}

// cancel is CAN or SUB: the sequence is abandoned.
func (p *parser) cancel() { p.endString() }

// plain is a byte that neither begins nor ends a sequence.
func (p *parser) plain(b byte) {
	switch p.state {
	case ground:
		if b == 0x0e { // SO: the G1 character set
			p.passed()
		}
		p.out = append(p.out, b)
	case escInter:
		switch {
		case b < 0x20:
			p.out = append(p.out, b) // acted on at once
		case b == 0x7f:
		case b <= 0x2f && len(p.head) < maxHead:
			p.head = append(p.head, b)
		case b >= 0x30 && b <= 0x7e:
			if p.head[0] == '%' {
				// ESC % @ takes xterm and the Linux console out of
				// UTF-8, where a byte the filter reads inside a
				// character is a C1 control.
				p.drop("ESC % (a switch of the terminal's character encoding)")
			} else {
				p.passed()
				p.out = append(append(append(p.out, 0x1b), p.head...), b)
			}
			p.head, p.state = p.head[:0], ground
		default:
			p.head, p.state = p.head[:0], ground
			p.plain(b)
		}
	case csi:
		switch {
		case b < 0x20:
			// The terminal acts on a C0 control inside a CSI at once,
			// and on the CSI at its final byte: so does the filter.
			p.out = append(p.out, b)
		case b == 0x7f:
			// Ignored inside a sequence.
		case b >= 0x80:
			// xterm reads U+00A0 to U+00FF inside a CSI as their ASCII
			// (ô as t): no program writes one there.
			p.drop("CSI with bytes other than ASCII")
			p.head, p.state = p.head[:0], csiDrop
		case b >= 0x40 && b <= 0x7e:
			p.head = append(p.head, b)
			p.finishCSI()
		default:
			p.head = append(p.head, b)
			if len(p.head) > maxHead {
				p.drop("CSI longer than " + strconv.Itoa(maxHead) + " bytes")
				p.head, p.state = p.head[:0], csiDrop
			}
		}
	case csiDrop:
		if b >= 0x40 && b <= 0x7e {
			p.state = ground
		}
	case oscHead:
		switch {
		case b == 0x07: // BEL ends an OSC
			if p.decideOSC(false) {
				p.out = append(p.out, b)
			}
			p.head, p.state = p.head[:0], ground
		case b < 0x20 || b == 0x7f:
			// Skipped inside the number by terminals; so by the filter,
			// which writes the number rebuilt.
		case b == ';':
			p.decideOSC(true)
		case b >= '0' && b <= '9' && len(p.head) < maxHead:
			p.head = append(p.head, b)
		default:
			p.drop("OSC " + quoteHead(string(p.head)+string(rune(b))) + " (not a numbered command moat passes)")
			p.head, p.state = p.head[:0], strDrop
		}
	case dcsHead:
		switch {
		case b < 0x20 || b == 0x7f:
			// Skipped by terminals and multiplexers inside the head.
		case b >= 0x40 && b <= 0x7e:
			p.head = append(p.head, b)
			p.decideDCS()
		case b >= 0x80 || len(p.head) >= maxHead:
			p.drop("DCS (not a kind moat passes: sixel, DECRQSS, XTGETTCAP, synchronized output)")
			p.head, p.state = p.head[:0], strDrop
		default:
			p.head = append(p.head, b)
		}
	case strPass:
		if p.kind == "OSC" && (b >= 0x80 || len(p.char) > 0) {
			p.oscChar(b)
			return
		}
		if b >= 0x80 && p.kind == "DCS" {
			// GNU screen writes a DCS's contents to the terminal as
			// bytes, one for each character, whatever it is (U+011B as
			// ESC): a DCS moat passes carries ASCII alone.
			p.endString()
			p.state = strDrop
			p.drop("DCS with bytes other than ASCII")
			return
		}
		p.out = append(p.out, b)
		if b == 0x07 && p.kind == "OSC" {
			p.state = ground
		}
	case strDrop:
		if b == 0x07 && p.kind == "OSC" {
			p.state = ground
		}
	}
}

// oscChar takes byte b of a passed OSC's text that is part of a
// character, or that follows one still held: the character is written
// once whole, unless GNU screen, which may write a title to the terminal
// one byte for each character, would write it as an ESC (U+011B, one
// character in 256), which would end the title and begin a sequence:
// then the OSC ends there and its rest is dropped. (Its other controls
// end nothing or begin nothing there.)
func (p *parser) oscChar(b byte) {
	if b < 0x80 {
		// What was held is a broken character, shown as such.
		p.out = append(p.out, p.char...)
		p.char = p.char[:0]
		p.out = append(p.out, b)
		if b == 0x07 {
			p.state = ground
		}
		return
	}
	p.char = append(p.char, b)
	if p.need > 0 {
		return
	}
	if r, _ := utf8.DecodeRune(p.char); r != utf8.RuneError && r&0xff == 0x1b {
		p.endString()
		p.state = strDrop
		p.drop("OSC with a character GNU screen writes as ESC")
		return
	}
	p.out = append(p.out, p.char...)
	p.char = p.char[:0]
}

// finishCSI decides a CSI held whole (its graphic bytes, the final one
// last): it is written as ESC [ and those bytes.
func (p *parser) finishCSI() {
	h := p.head
	p.state = ground
	if h[len(h)-1] == 't' {
		first := h[:len(h)-1]
		for i, c := range first {
			if c == ';' || c == ':' {
				first = first[:i]
				break
			}
		}
		if n, err := strconv.Atoi(string(first)); err == nil && len(first) > 0 && first[0] >= '0' && first[0] <= '9' && (n == 20 || n == 21) {
			p.drop("CSI " + strconv.Itoa(n) + " t (a title report, read as typed input)")
			p.head = p.head[:0]
			return
		}
	}
	p.passed()
	p.left.csi(h)
	p.out = append(append(p.out, 0x1b, '['), h...)
	p.head = p.head[:0]
}

// decideOSC settles an OSC whose number has ended, with ';' (more) or
// with the string: it writes ESC ] and the number, and the ';' when there
// is more (whose rest it then passes), or drops it. It reports whether it
// passed.
func (p *parser) decideOSC(more bool) bool {
	num := string(p.head)
	p.head = p.head[:0]
	pass, why := oscAllowed(num)
	if !pass {
		p.state = strDrop
		p.drop(why)
		return false
	}
	n, _ := strconv.Atoi(num)
	p.passed()
	p.left.osc(n)
	p.out = append(p.out, 0x1b, ']')
	p.out = strconv.AppendInt(p.out, int64(n), 10)
	if more {
		p.out = append(p.out, ';')
	}
	p.state = strPass
	return true
}

// decideDCS settles a DCS whose head (parameters, intermediates, final
// byte) is read: only the kinds that draw or ask about the terminal's
// state pass, written as ESC P and the head.
func (p *parser) decideDCS() {
	h := string(p.head)
	p.head = p.head[:0]
	final := h[len(h)-1]
	rest := h[:len(h)-1]
	ok := false
	switch {
	case final == 'q' && (rest == "$" || rest == "+"): // DECRQSS, XTGETTCAP
		ok = true
	case final == 'q': // sixel: numeric parameters only
		ok = true
		for _, c := range rest {
			if (c < '0' || c > '9') && c != ';' {
				ok = false
			}
		}
	case final == 's' && (rest == "=1" || rest == "=2"): // synchronized output
		ok = true
	}
	if !ok {
		p.state = strDrop
		switch h {
		case "z":
			// vim's DCS zz, a no-op that ends its requests: dropped
			// without a word, or every vim session would report one.
		case "t":
			p.drop("DCS tmux; (a multiplexer's passthrough to the terminal)")
		default:
			p.drop("DCS (not a kind moat passes: sixel, DECRQSS, XTGETTCAP, synchronized output)")
		}
		return
	}
	p.passed()
	p.out = append(append(p.out, 0x1b, 'P'), h...)
	p.state = strPass
}

// oscAllowed says whether an OSC of this number draws or marks the screen
// only: the title, colours, the working directory, hyperlinks, a prompt's
// marks, notifications.
func oscAllowed(num string) (bool, string) {
	n, err := strconv.Atoi(num)
	if err != nil || num == "" {
		return false, "OSC " + quoteHead(num) + " (not a numbered command moat passes)"
	}
	switch {
	case n <= 2, n == 4, n == 5, n == 7, n == 8, n == 9,
		n >= 10 && n <= 19, n == 22, n == 99, n == 104, n == 105,
		n >= 110 && n <= 119, n == 133, n == 633, n == 777:
		return true, ""
	}
	s := strconv.Itoa(n)
	switch n {
	case 52, 5522:
		return false, "OSC " + s + " (clipboard)"
	case 1337:
		return false, "OSC 1337 (iTerm2's commands: file transfers among them)"
	case 5113:
		return false, "OSC 5113 (kitty's file transfer)"
	case 46:
		return false, "OSC 46 (xterm's log file)"
	case 50:
		return false, "OSC 50 (xterm's font)"
	}
	return false, "OSC " + s + " (not one moat passes)"
}

// quoteHead shows an OSC's head that is no number, briefly.
func quoteHead(s string) string {
	if len(s) > 12 {
		s = s[:12]
	}
	return strconv.Quote(s)
}
