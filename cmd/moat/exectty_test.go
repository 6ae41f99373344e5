//go:build linux

package main

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestExecTTY: moat exec -t gives the command a terminal of the size of
// moat's, follows its resizes, relays keystrokes, and leaves moat's
// terminal in the mode it found it. The positive control: without -t the
// command has no terminal.
func TestExecTTY(t *testing.T) {
	sock, _ := startServe(t)
	dir := t.TempDir()
	code, out, errs := moat(t, dir, "session", "create", "--socket", sock, "--temp")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("session create: %d %q", code, errs)
	}
	if code, out, _ := moat(t, dir, "exec", "--socket", sock, id, "--", "sh", "-c", "[ -t 0 ] || echo none"); code != 0 || out != "none\n" {
		t.Fatalf("exec without -t: %d %q", code, out)
	}

	if code, _, errs := moat(t, dir, "exec", "--socket", sock, "-t", id, "--", "true"); code != exitMoatError || !strings.Contains(errs, "needs a terminal") {
		t.Errorf("exec -t without a terminal: %d %q", code, errs)
	}
	if code, _, _ := moat(t, dir, "exec", "--socket", sock, "-t", "-d", id, "--", "true"); code != 2 {
		t.Errorf("exec -t -d: %d", code)
	}

	o := newOuterTerminal(t)
	setSize := func(rows, cols uint16) {
		if err := unix.IoctlSetWinsize(int(o.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
			t.Fatal(err)
		}
	}
	setSize(21, 71)
	before := o.mode(t)
	// The terminal's type goes with it.
	t.Setenv("TERM", "xterm-moat-test")
	cmd := o.start(t, dir, "exec", "--socket", sock, "-t", id, "--", "sh", "-c", `[ -t 0 ] && echo terminal; echo "type=$TERM"; stty size; while read l; do echo "line $l"; stty size; done; exit 4`)
	o.waitFor(t, "type=xterm-moat-test")
	o.waitFor(t, "21 71")
	o.waitFor(t, "terminal")
	setSize(31, 91)
	// The new size reaches the command by a message of its own: type until
	// a size it reports is the new one.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(o.shown(), "31 91") {
		if time.Now().After(deadline) {
			t.Fatalf("the resize never reached the command; the terminal shows %q", o.shown())
		}
		o.master.Write([]byte("x\r"))
		time.Sleep(50 * time.Millisecond)
	}
	o.waitFor(t, "line x")
	// ^D on the command's terminal (raw mode: moat's own does not act on it).
	o.master.Write([]byte{4})
	if code := o.wait(t, cmd); code != 4 {
		t.Errorf("moat exec -t exited %d, want the command's 4; the terminal shows %q", code, o.shown())
	}
	after := o.mode(t)
	if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag {
		t.Errorf("the terminal's mode was not restored: lflag %#x -> %#x, iflag %#x -> %#x", before.Lflag, after.Lflag, before.Iflag, after.Iflag)
	}
}
