package termsafe

import (
	"bytes"
	"maps"
	"strconv"
	"strings"
	"testing"
)

// filter passes in through a Writer in chunks of size n (0: whole) and
// returns what reached the writer under it and what was dropped.
func filter(t *testing.T, in string, n int) (string, []Drop) {
	t.Helper()
	var out bytes.Buffer
	w := New(&out)
	b := []byte(in)
	if n <= 0 {
		n = len(b) + 1
	}
	for len(b) > 0 {
		k := min(n, len(b))
		if got, err := w.Write(b[:k]); err != nil || got != k {
			t.Fatalf("Write = %d, %v; want %d, nil", got, err, k)
		}
		b = b[k:]
	}
	// The undoing of what the command left set and the rendering's
	// reset after it are TestCloseUndoesWhatWasLeft's and
	// TestCloseResetsRendering's.
	l := w.p.left
	l.modes = maps.Clone(l.modes)
	tail := string(l.undo(nil)) + resetRendering
	w.Close()
	return strings.TrimSuffix(out.String(), tail), w.Dropped()
}

// TestPassesWhatDraws is the positive control: text and the sequences
// full-screen programs draw with come through unchanged, in any chunking.
func TestPassesWhatDraws(t *testing.T) {
	for _, in := range []string{
		"plain text\r\n",
		"héllo → wörld ©°\u00a0 日本語 🙂\n",
		"\x1b[1;31mred\x1b[0m \x1b[38;2;255;128;0mrgb\x1b[m",
		"\x1b[?1049h\x1b[H\x1b[2J\x1b[10;20H\x1b[?25l\x1b[?1049l",
		"\x1b]0;my title\x07", "\x1b]2;title\x1b\\",
		"\x1b]8;;https://example.com/\x1b\\link\x1b]8;;\x1b\\",
		"\x1b]7;file://host/home/agent\x07",
		"\x1b]133;A\x07$ \x1b]133;B\x07",
		"\x1b]11;?\x07", "\x1b]4;1;rgb:ff/00/00\x07", "\x1b]104\x07",
		"\x1b]9;4;1;50\x07", "\x1b]777;notify;done;build\x07",
		"\x1b]2;中文 title, café, Přehled\x1b\\", // characters in a title
		"\x1bP$qm\x1b\\", "\x1bP+q544e\x1b\\", "\x1bPq#0;2;0;0;0#0~~@@vv@@~~$-\x1b\\",
		"\x1b(B\x1b)0\x1b7\x1b8\x1b=\x1b>\x1bM\x1bD\x1bc",
		"\x1b[6n\x1b[c\x1b[>c\x1b[18t\x1b[14t\x1b[22;0t\x1b[23;0t",
		"tab\there\bback\a",
	} {
		for _, n := range []int{0, 1, 2, 3, 7} {
			got, drops := filter(t, in, n)
			if got != in || len(drops) != 0 {
				t.Errorf("chunks of %d: %q became %q, dropped %v", n, in, got, drops)
			}
		}
	}
}

// TestDropsWhatReachesBeyondTheScreen: the sequences that write or read
// the clipboard, transfer files, report the title as input or pass
// through a multiplexer are removed, whatever form they take, and the
// text around them stays.
func TestDropsWhatReachesBeyondTheScreen(t *testing.T) {
	for _, c := range []struct{ in, want, what string }{
		{"a\x1b]52;c;cm0gLXJmIH4K\x07b", "ab", "OSC 52 (clipboard)"},
		{"a\x1b]52;c;?\x1b\\b", "ab", "OSC 52 (clipboard)"},
		{"a\xc2\x9d52;c;eA==\xc2\x9cb", "ab", "OSC 52 (clipboard)"}, // C1 in UTF-8
		{"a\x9d52;c;eA==\x9cb", "ab", "OSC 52 (clipboard)"},         // 8-bit C1
		{"a\x1b]5\n2;c;eA==\x07b", "ab", "OSC 52 (clipboard)"},      // a control in the head
		{"a\x1b]0052;c;eA==\x07b", "ab", "OSC 52 (clipboard)"},      // zeros
		// Found by a reviewer: a number longer than the head held, C0
		// padding (skipped by terminals), a C1 control after a byte that
		// breaks a character or is no lead, a title report in non-ASCII
		// (xterm reads ô as t), DCS kinds other than those that draw.
		{"a\x1b]" + strings.Repeat("0", 300) + "52;c;eA==\x07b", "ab", ""},
		{"a\x1b]" + strings.Repeat("\x01", 62) + "52;c;eA==\x07b", "ab", "OSC 52 (clipboard)"},
		{"A\xc3\xc2\x9d52;c;eA==\x07B", "A\xc3B", "OSC 52 (clipboard)"},
		{"A\xe2\xc2\x9d52;c;eA==\x1b\\B", "A\xe2B", "OSC 52 (clipboard)"},
		{"A\xc0\x9d52;c;eA==\x07B", "A\xc0B", "OSC 52 (clipboard)"},
		{"A\xf5\x9d52;c;eA==\x07B", "A\xf5B", "OSC 52 (clipboard)"},
		{"A\xe0\x9d52;c;eA==\x07B", "A\xe0B", "OSC 52 (clipboard)"}, // E0 takes A0 to BF next
		{"a\x1b[\xc2\xb2\xc2\xb1tb", "ab", "CSI with bytes other than ASCII"},
		{"a\x1b[21\xc3\xb4Ab", "ab", "CSI with bytes other than ASCII"},
		{"a\x1bP" + strings.Repeat("\x01", 63) + "tmux;x\x1b\\b", "ab", "DCS tmux; (a multiplexer's passthrough to the terminal)"},
		{"a\x1bP1tmux;x\x1b\\b", "ab", ""},
		{"a\x1bP\xc4\x9b]52;c;eA==\x07\x1b\\b", "ab", ""}, // GNU screen writes U+011B as ESC
		{"a\x1bPq#0\xc4\x9b]52;c;eA==\x07\x1b\\b", "a\x1bPq#0\x1b\\b", "DCS with bytes other than ASCII"},
		{"a\x1bP@kitty-cmd{\"cmd\":\"launch\"}\x1b\\b", "ab", ""}, // kitty's remote control
		{"a\x1bP0;1|17/ab\x1b\\b", "ab", ""},                      // xterm's DECUDK
		// A reviewer's: U+011B in a title, which GNU screen may write as
		// ESC.
		{"a\x1b]2;x\xc4\x9b]52;c;eA==\x07b", "a\x1b]2;x\x1b\\b", "OSC with a character GNU screen writes as ESC"},
		// Found by a tester: a C0 control between the ESC and what it
		// begins, acted on while the ESC waits; ESC % @ (out of UTF-8).
		{"A\x1b\x07]52;c;cHduZWQ=\x07B", "A\x07B", "OSC 52 (clipboard)"},
		{"A\x1b\x08_Gf=100;eA==\x1b\\B", "A\x08B", ""},
		{"A\x1b\x7fPtmux;x\x1b\\B", "AB", ""},
		{"A\x1b\r[21tB", "A\rB", "CSI 21 t (a title report, read as typed input)"},
		{"A\x1b%@B", "AB", "ESC % (a switch of the terminal's character encoding)"},
		// A tester's: ESC then an 8-bit C1 OSC (ESC abandoned by it).
		{"A\x1b\x9d52;c;ZWNobw==\x07B", "AB", "OSC 52 (clipboard)"},
		{"A\x1b\xc2\x9d52;c;ZWNobw==\x07B", "AB", "OSC 52 (clipboard)"},
		{"a\x1b]1337;File=name=eA==:eA==\x07b", "ab", "OSC 1337 (iTerm2's commands: file transfers among them)"},
		{"a\x1b]5113;ac=send\x1b\\b", "ab", "OSC 5113 (kitty's file transfer)"},
		{"a\x1b]46;/tmp/log\x07b", "ab", "OSC 46 (xterm's log file)"},
		{"a\x1b]50;#+1\x07b", "ab", "OSC 50 (xterm's font)"},
		{"a\x1b]3;WM_NAME=x\x07b", "ab", "OSC 3 (not one moat passes)"},
		{"a\x1b]L;x\x07b", "ab", `OSC "L" (not a numbered command moat passes)`},
		{"a\x1b[21tb", "ab", "CSI 21 t (a title report, read as typed input)"},
		{"a\x1b[20;0tb", "ab", "CSI 20 t (a title report, read as typed input)"},
		{"a\x1b[2\n1tb", "a\nb", "CSI 21 t (a title report, read as typed input)"},
		{"a\x1b[021tb", "ab", "CSI 21 t (a title report, read as typed input)"},
		{"a\x1b_Ga=T,t=f;L2V0Yy9wYXNzd2Q=\x1b\\b", "ab", "APC (application commands: kitty's graphics read files of the host)"},
		{"a\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\b", "a\x1b\\b", ""}, // tmux's passthrough; a lone ST does nothing
		{"a\x1b[" + strings.Repeat("1;", 200) + "mb", "ab", "CSI longer than 256 bytes"},
	} {
		for _, n := range []int{0, 1, 2, 5} {
			got, drops := filter(t, c.in, n)
			if got != c.want {
				t.Errorf("chunks of %d: %q became %q, want %q", n, c.in, got, c.want)
			}
			if len(drops) == 0 {
				t.Errorf("chunks of %d: %q: nothing reported dropped", n, c.in)
			} else if c.what != "" && drops[0].What != c.what {
				t.Errorf("chunks of %d: %q: dropped %v, want %q", n, c.in, drops, c.what)
			}
		}
	}
}

// TestNoSplicing: no dropped sequence leaves behind bytes that join with
// what follows into one the filter would have dropped. The output of each
// is run through the filter again: what it passed must pass unchanged.
func TestNoSplicing(t *testing.T) {
	for _, in := range []string{
		"\x1b\x1b]52;c;eA==\x07]52;c;eA==\x07", // an abandoned ESC
		"\x1b[21\x1b]52;x\x07t",                // a CSI cut by a dropped OSC
		"\x1b]5\x1b]52;x\x072;c;eA==\x07",      // an OSC head cut by a dropped OSC
		"\x1b]5\x182;c;eA==\x07",               // cancelled
		"\x1b]0;t\x1b]52;x\x07\x07",            // inside a passed title
		"\x1bPq\x1b]52;x\x07\x1b\\",            // inside a passed DCS
		"\xc2\x1b]52;x\x07\x9d52;c;eA==\x07",   // a held UTF-8 lead
		"\x1b_x\x1b\\\x1b]52;c;eA==\x07",       // after a dropped APC
		"\x1bP$q\x9d52;c;eA==\x07\x1b\\",       // an 8-bit C1 in a DCS
		"\x1b[2\x1b[1t",
	} {
		for _, n := range []int{0, 1, 3} {
			got, _ := filter(t, in, n)
			again, drops := filter(t, got, 0)
			if again != got || len(drops) != 0 {
				t.Errorf("chunks of %d: %q passed %q, which the filter changes to %q (%v)", n, in, got, again, drops)
			}
			if strings.Contains(got, "\x1b]52") || strings.Contains(got, "\x9d52") || strings.Contains(got, "[21t") {
				t.Errorf("chunks of %d: %q passed %q", n, in, got)
			}
		}
	}
}

// TestCloseEndsAnOpenString: a title left open is ended, so that what is
// written next is not part of it; an undecided head is dropped.
func TestCloseEndsAnOpenString(t *testing.T) {
	if got, _ := filter(t, "\x1b]0;half a title", 0); got != "\x1b]0;half a title\x1b\\" {
		t.Errorf("got %q", got)
	}
	if got, _ := filter(t, "x\x1b]5", 0); got != "x" {
		t.Errorf("got %q", got)
	}
	if got, _ := filter(t, "x\x1b", 0); got != "x" {
		t.Errorf("got %q", got)
	}
}

// TestCounts: each dropped sequence is counted under its kind.
func TestCounts(t *testing.T) {
	_, drops := filter(t, strings.Repeat("\x1b]52;c;eA==\x07", 3)+"\x1b[21t", 4)
	want := []Drop{{"CSI 21 t (a title report, read as typed input)", 1}, {"OSC 52 (clipboard)", 3}}
	if len(drops) != len(want) || drops[0] != want[0] || drops[1] != want[1] {
		t.Errorf("got %v, want %v", drops, want)
	}
}

func FuzzFilterIsIdempotent(f *testing.F) {
	f.Add([]byte("\x1b]52;c;eA==\x07"))
	f.Add([]byte("\x1b[21t\xc2\x9d0;x\xc2\x9c"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var once, twice bytes.Buffer
		w := New(&once)
		w.Write(in)
		w.Close()
		w2 := New(&twice)
		w2.Write(once.Bytes())
		w2.Close()
		// Each pass may end with the rendering's reset: the same text
		// must pass unchanged under them.
		a, b := once.Bytes(), twice.Bytes()
		for bytes.HasSuffix(a, []byte(resetRendering)) {
			a = a[:len(a)-len(resetRendering)]
		}
		for bytes.HasSuffix(b, []byte(resetRendering)) {
			b = b[:len(b)-len(resetRendering)]
		}
		if !bytes.Equal(a, b) || len(w2.Dropped()) != 0 {
			t.Fatalf("%q passed %q, then %q (%v)", in, once.Bytes(), twice.Bytes(), w2.Dropped())
		}
	})
}

// TestCloseResetsRendering: after a command that wrote control sequences,
// what it left set (attributes, a line-drawing set, a hidden cursor) is
// reset at the end, so that moat's report after it reads plainly; the
// control: plain text gets no reset.
func TestCloseResetsRendering(t *testing.T) {
	for in, want := range map[string]bool{"\x1b[8mhidden": true, "\x0egraphics": true, "plain text\n": false, "caf\xc3\xa9\n": false} {
		var out bytes.Buffer
		w := New(&out)
		w.Write([]byte(in))
		w.Close()
		if got := strings.HasSuffix(out.String(), resetRendering); got != want {
			t.Errorf("%q: reset %v, want %v (%q)", in, got, want, out.String())
		}
	}
}

// TestSetSharesOneParser: the writers of a Set share one parser, as the
// outputs they stand for reach one terminal: an OSC begun on one and its
// number finished on another is read whole (two parsers each saw half).
func TestSetSharesOneParser(t *testing.T) {
	var out bytes.Buffer
	p := newParser()
	a, b := &Writer{p: p, w: &out}, &Writer{p: p, w: &out}
	a.Write([]byte("x\x1b]5"))
	b.Write([]byte("2;c;eA==\x07y"))
	a.Close()
	if got := strings.TrimSuffix(out.String(), resetRendering); got != "xy" {
		t.Errorf("got %q", got)
	}
}

// TestKindsBounded: a command that makes a new kind of drop in each
// sequence (an OSC number of its choosing) is counted in a bounded number
// of kinds, the rest together.
func TestKindsBounded(t *testing.T) {
	var in strings.Builder
	for n := range 1000 {
		in.WriteString("\x1b]" + strconv.Itoa(1000+n) + ";x\x07")
	}
	_, drops := filter(t, in.String(), 0)
	total := 0
	for _, d := range drops {
		total += d.Count
	}
	if len(drops) > maxKinds+1 || total != 1000 {
		t.Errorf("%d kinds, %d drops: want at most %d kinds, 1000 drops", len(drops), total, maxKinds+1)
	}
}

// TestPassedStringEndsWith7BitST: a lone 0x9c ends a passed string for
// the filter but not for a terminal reading UTF-8 (a character to it), so
// the filter ends the string with ESC \ whatever ended it (a reviewer's
// DCS through GNU screen: what followed was read inside the DCS).
func TestPassedStringEndsWith7BitST(t *testing.T) {
	for in, want := range map[string]string{
		"a\x1bP$qm\x9cb":     "a\x1bP$qm\x1b\\b",
		"a\x1bP$qm\xc2\x9cb": "a\x1bP$qm\x1b\\b",
		"a\x1b]2;t\x9cb":     "a\x1b]2;t\x1b\\b",
		"a\x1b]104\x9cb":     "a\x1b]104\x1b\\b",
	} {
		if got, _ := filter(t, in, 1); got != want {
			t.Errorf("%q became %q, want %q", in, got, want)
		}
	}
}

// TestCloseUndoesWhatWasLeft: what a command set that outlives it and
// changes what is written after (a scroll region in which moat's question
// scrolls out of sight, found by a tester; the alternate screen; colours;
// mouse and keyboard modes) is undone at the end, and only what is still
// set: the control, a program that set and reset its modes itself (a
// full-screen editor), gets the rendering's reset alone.
func TestCloseUndoesWhatWasLeft(t *testing.T) {
	for _, c := range []struct{ in, undo string }{
		{"\x1b[23;24r\x1b[24;1H", "\x1b7\x1b[?69l\x1b[r\x1b8"},
		{"\x1b[?1049h\x1b[?1000;1006h", "\x1b[?1049l\x1b[?1000l\x1b[?1006l"},
		{"\x1b[?1049h\x1b[2J\x1b[?1049l", ""},
		{"\x1b[1;2r\x1b[r", ""},
		{"\x1b]10;#101010\x07\x1b]11;#101010\x1b\\", "\x1b]110\x1b\\\x1b]111\x1b\\"},
		{"\x1b]4;1;rgb:ff/00/00\x07\x1b]104\x07", ""},
		{"\x1b[>1u\x1b[>5u\x1b[<u", "\x1b[<1u"},
		{"\x1b[>4;2m", "\x1b[>4m"},
		{"\x1b=\x1b[?1h\x1b[?2004h", "\x1b[?1l\x1b[?2004l\x1b>"},
		{"\x1b[?5h\x1b[?6h\x1bc", ""},
		{"\x1b[?25l\x1b[8m", ""},
		// Keypad, newline, auto-repeat, origin and synchronized-output
		// modes and cleared tab stops stayed set (found by a tester).
		{"\x1b[?66h\x1b[20h\x1b[?8l\x1b[?6h\x1b[?2026h\x1b[3g", "\x1b[?6l\x1b[?8h\x1b[?66l\x1b[?2026l\x1b[20l\x1b[?5W"},
		{"\x1bH", "\x1b[?5W"},
		{"\x1b[2 q\x1b[?7727h\x1b[?1036h", "\x1b[?1036l\x1b[?7727l\x1b[0 q"},
		{"\x1b[2 q\x1b[ q", ""},
		{"\x1b[?8l\x1b[?8h\x1b[20h\x1b[20l", ""},
	} {
		var out bytes.Buffer
		w := New(&out)
		w.Write([]byte(c.in))
		w.Close()
		want := c.in + c.undo + resetRendering
		if out.String() != want {
			t.Errorf("%q: ended %q, want %q", c.in, strings.TrimPrefix(out.String(), c.in), c.undo+resetRendering)
		}
		// What undo writes leaves nothing to undo.
		var again bytes.Buffer
		w2 := New(&again)
		w2.Write(out.Bytes())
		w2.Close()
		if again.String() != out.String()+resetRendering {
			t.Errorf("%q passed again: ended %q", c.in, strings.TrimPrefix(again.String(), out.String()))
		}
	}
}
