package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// ttyApprover asks the person at the controlling terminal, as sudo does:
// on /dev/tty, so that it works when stdin and stdout are pipes, and never
// reads an answer from the command's input.
//
// The command's output may reach the same terminal (moat copies it to its
// own stdout and stderr), and a program the command starts is asked
// about while the command's other processes run on. So that what the
// person reads is moat's question and nothing the command wrote, a
// question holds the command's output (gate) from before it is written
// until it is answered, starts with the terminal's rendering reset, and
// takes no line typed (or sent by the terminal) before it was on screen.
type ttyApprover struct {
	tty *os.File
	// gate holds the command's output to a terminal (gated) while a
	// question is on the terminal; it also puts one question at a time
	// on the terminal.
	gate sync.Mutex
	// relayed is set once the terminal is the command's (the backend
	// relays it in raw mode): a question then would race the command for
	// the person's keys, so it is refused instead.
	relayed atomic.Bool
	// lines are the terminal's lines, read by one goroutine for every
	// question: a reader left behind by a question that timed out would
	// otherwise take the next answer. Each carries when it was read, so
	// that a line that came before its question (typed ahead, or a
	// terminal's answer to a query the command wrote) is dropped.
	lines     chan ttyLine
	startRead sync.Once
	// asking is closed by interrupt to end the question on the terminal
	// (nil when there is none); under mu.
	mu     sync.Mutex
	asking chan struct{}
	signal os.Signal
}

// errInterrupted: a signal to moat (Ctrl-C, SIGTERM, SIGHUP) came while
// a question was on the terminal, which it answers no.
var errInterrupted error = interrupted{}

type interrupted struct{}

func (interrupted) Error() string { return "interrupted while asking" }

// Is makes the ask cancelled, not denied (sandbox.ApprovalCancelled).
func (interrupted) Is(target error) bool { return target == context.Canceled }

// interrupt answers the question on the terminal, if there is one, no,
// saying that sig came; it reports whether there was one.
func (t *ttyApprover) interrupt(sig os.Signal) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.asking == nil {
		return false
	}
	t.signal = sig
	close(t.asking)
	t.asking = nil
	return true
}

type ttyLine struct {
	text string
	at   time.Time
}

// gated returns w, whose writes wait while a question is on the
// terminal: the command's output cannot redraw or hide the question
// while the person reads it. Output that is no terminal (a pipe, a
// file) is returned as it is: it cannot redraw the question, and a write
// blocked on it (moat run … | less) would hold the question back.
func (t *ttyApprover) gated(w io.Writer) io.Writer {
	if !isTerminal(w) {
		return w
	}
	return &gatedWriter{t: t, w: w}
}

type gatedWriter struct {
	t *ttyApprover
	w io.Writer
}

// Unwrap is the terminal under it: output to a terminal is filtered
// (backend.Stdio), and the filter finds the terminal through it.
func (g *gatedWriter) Unwrap() io.Writer { return g.w }

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.t.gate.Lock()
	defer g.t.gate.Unlock()
	return g.w.Write(p)
}

// resetRendering undoes what output written before a question could have
// set to hide or garble it: attributes (invisible, colours), a line
// drawing character set, insert mode, no line wrap, a hidden cursor.
const resetRendering = "\x1b[0m\x1b(B\x0f\x1b[4l\x1b[?7h\x1b[?25h"

// questionReset comes before a question, whatever the command wrote (what
// it left set is the output filter's to know, not the approver's):
// reverse video; the palette and default colours,
// which can make moat's text the colour of the background while a fake
// question in other colours shows; a hyperlink left open; the scroll
// region and left and right margins, in which the question's lines would
// scroll out of sight under a fake one drawn above (found by a tester;
// reset around a saved cursor, which stays where it was); then the
// rendering. The question then begins on a line of its own with all below
// it erased, so nothing the command drew there reads as part of it.
const questionReset = "\x1b[?5l\x1b]104\x1b\\\x1b]110\x1b\\\x1b]111\x1b\\\x1b]8;;\x1b\\" +
	"\x1b7\x1b[?69l\x1b[r\x1b8" + resetRendering + "\r\n\x1b[J"

// shown is s as text: quoted, its control characters escaped, when it
// has any (workspace.MustEscape: bidirectional controls, which reorder
// what the terminal displays, too). strconv.Quote escapes each of them.
func shown(s string) string {
	if strings.IndexFunc(s, workspace.MustEscape) < 0 {
		return s
	}
	return quoted(s)
}

// quoted is strconv.Quote's s with every character workspace.MustEscape
// names escaped too: Go takes some of them for printable (U+3164, a
// Hangul filler drawn as a blank, and the tag characters), and a run of
// them padded an asked command's real words out of sight (found by a
// tester).
func quoted(s string) string {
	q := strconv.Quote(s)
	if strings.IndexFunc(q, workspace.MustEscape) < 0 {
		return q
	}
	var b strings.Builder
	for _, r := range q {
		switch {
		case !workspace.MustEscape(r):
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.String()
}

// Bounds of a command line as a question shows it: an argument of
// thousands of spaces wrapped over the screen's height and scrolled the
// question's first lines, the program and the rule, out of sight (found
// by a tester). The decision is on the whole command line; the question
// says how much it left out.
const (
	shownArgBytes = 160
	shownArgs     = 40
)

// shownArgv is argv quoted as %q quotes it, each argument past
// shownArgBytes cut with the count of its bytes, and past shownArgs
// arguments the count of the rest.
func shownArgv(argv []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, a := range argv {
		if i == shownArgs {
			fmt.Fprintf(&b, " …and %d more arguments", len(argv)-i)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if len(a) > shownArgBytes {
			cut := shownArgBytes
			for cut > 0 && !utf8.RuneStart(a[cut]) {
				cut--
			}
			fmt.Fprintf(&b, "%q…(%d bytes in all)", a[:cut], len(a))
			continue
		}
		fmt.Fprintf(&b, "%q", a)
	}
	b.WriteByte(']')
	return b.String()
}

// defaultTTL is how long a prefix or session approval lasts when the
// person just presses Enter.
const defaultTTL = 15 * time.Minute

// newTTYApprover returns an approver on the controlling terminal, or nil
// when there is none (then an ask refuses the run).
func newTTYApprover() *ttyApprover {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	return &ttyApprover{tty: tty, lines: make(chan ttyLine)}
}

func (t *ttyApprover) Name() string { return "tty" }

// Approve is ApproveScoped for a caller that needs only a yes or a no.
func (t *ttyApprover) Approve(ctx context.Context, a harness.Action, d harness.Decision) (bool, error) {
	g, err := t.ApproveScoped(ctx, a, d)
	return g != nil, err
}

// ApproveScoped shows the exact command, where it runs and the rule, and
// reads the answer: y runs it once; p a command prefix and s everything
// the rule asks about, each for a while; anything else (or end of input)
// refuses.
func (t *ttyApprover) ApproveScoped(ctx context.Context, a harness.Action, d harness.Decision) (*harness.Grant, error) {
	if t.relayed.Load() {
		return nil, fmt.Errorf("%w: the terminal is the command's during an interactive run; run with stdin from a pipe or a file to be asked, or add an allow rule", sandbox.ErrNoApprover)
	}
	if err := t.hold(ctx); err != nil {
		return nil, err
	}
	defer t.gate.Unlock()
	var b strings.Builder
	b.WriteString(questionReset)
	rule := "the command line"
	if d.Rule != nil {
		rule = "rule " + d.Rule.String()
	}
	if r := a.Request; r != nil {
		what := "a connection (the proxy sees no request inside it)"
		if r.Method != "" {
			what = r.Method + " " + r.Path
		}
		fmt.Fprintf(&b, "moat: %s asks before the command reaches %s:%d:\n  request: %s\n  reason: %s\n", rule, shown(r.Host), r.Port, shown(what), workspace.EscapeText(d.Reason))
		b.WriteString("Let it through? [y] once, [s] all this rule asks for this run, [N] no: ")
	} else {
		fmt.Fprintf(&b, "moat: %s asks before this runs:\n", rule)
		fmt.Fprintf(&b, "  command: %s\n", shownArgv(a.Argv))
		if len(d.Command) > 0 && !equalArgv(d.Command, a.Argv) {
			fmt.Fprintf(&b, "  because of: %s\n", shownArgv(d.Command))
		}
		// A reason may quote the line (the harness escapes what it
		// quotes) or come from the policy: escaped here too, the
		// terminal's last guard.
		fmt.Fprintf(&b, "  in: %s\n  reason: %s\n", shown(a.Dir), workspace.EscapeText(d.Reason))
		b.WriteString("Run it? [y] once, [p] a command prefix, [s] all this rule asks for this run, [N] no: ")
	}
	answer, err := t.ask(ctx, b.String())
	if err != nil {
		return nil, err
	}
	var scope harness.Scope
	switch strings.ToLower(answer) {
	case "y", "yes":
		scope = harness.ScopeOnce
	case "p":
		scope = harness.ScopePrefix
	case "s":
		scope = harness.ScopeSession
	default:
		t.tty.WriteString("moat: not run\n")
		return nil, nil
	}
	var prefix []string
	var ttl time.Duration
	if scope == harness.ScopePrefix {
		cmd := d.Command
		if len(cmd) == 0 {
			cmd = a.Argv
		}
		line, err := t.ask(ctx, fmt.Sprintf("Prefix (words the command begins with) [%s]: ", strings.Join(cmd, " ")))
		if err != nil {
			return nil, err
		}
		if prefix = strings.Fields(line); len(prefix) == 0 {
			prefix = cmd
		}
		// A prefix the grant would refuse is refused now, before the
		// question of how long.
		if _, err := harness.NewGrant(scope, a, d, prefix, defaultTTL, t.Name(), time.Now()); err != nil {
			fmt.Fprintf(t.tty, "moat: %v; not run\n", err)
			return nil, err
		}
	}
	if scope != harness.ScopeOnce {
		line, err := t.ask(ctx, fmt.Sprintf("For how long? [%s]: ", defaultTTL))
		if err != nil {
			return nil, err
		}
		ttl = defaultTTL
		if line != "" {
			if ttl, err = time.ParseDuration(line); err != nil {
				t.tty.WriteString("moat: not a duration (say 10m or 1h); not run\n")
				return nil, fmt.Errorf("not a duration: %q", line)
			}
		}
	}
	g, err := harness.NewGrant(scope, a, d, prefix, ttl, t.Name(), time.Now())
	if err != nil {
		fmt.Fprintf(t.tty, "moat: %v; not run\n", err)
		return nil, err
	}
	return &g, nil
}

// hold takes the gate: the command's output waits from now until the
// question is answered, and so does any other question.
func (t *ttyApprover) hold(ctx context.Context) error {
	got := make(chan struct{})
	go func() {
		t.gate.Lock()
		close(got)
	}()
	select {
	case <-got:
		return nil
	case <-ctx.Done():
		// The gate is given back as soon as it is had.
		go func() {
			<-got
			t.gate.Unlock()
		}()
		return ctx.Err()
	}
}

// ask writes a question and returns the next line typed once it was
// about to be written, trimmed.
func (t *ttyApprover) ask(ctx context.Context, question string) (string, error) {
	// What waits in the terminal's input was typed before the question
	// showed: gone, and so is any line read before (below). Both come
	// before the question is written, so that an answer typed the moment
	// it shows is taken.
	flushInput(t.tty)
	since := time.Now()
	asking := make(chan struct{})
	t.mu.Lock()
	t.asking = asking
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if t.asking == asking {
			t.asking = nil
		}
		t.mu.Unlock()
	}()
	if _, err := t.tty.WriteString(question); err != nil {
		return "", err
	}
	t.startRead.Do(func() {
		go func() {
			buf := make([]byte, 4096)
			var pending []byte
			for {
				n, err := t.tty.Read(buf)
				at := time.Now()
				pending = append(pending, buf[:n]...)
				for {
					i := bytes.IndexByte(pending, '\n')
					if i < 0 {
						break
					}
					t.lines <- ttyLine{text: string(pending[:i]), at: at}
					pending = pending[i+1:]
				}
				if len(pending) > 1<<16 {
					pending = nil // no line of a person's
				}
				if err != nil {
					if len(pending) > 0 {
						t.lines <- ttyLine{text: string(pending), at: at}
					}
					close(t.lines)
					return
				}
			}
		}()
	})
	for {
		select {
		case line, ok := <-t.lines:
			if !ok {
				return "", errors.New("the terminal closed")
			}
			if line.at.Before(since) {
				continue
			}
			return strings.TrimSpace(line.text), nil
		case <-asking:
			t.mu.Lock()
			sig := t.signal
			t.mu.Unlock()
			name := "a signal"
			if s, ok := sig.(syscall.Signal); ok {
				name = sandbox.SignalName(s)
			}
			fmt.Fprintf(t.tty, "\nmoat: %s; not run\n", name)
			return "", errInterrupted
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.tty.WriteString("\nmoat: no answer in time; not run\n")
				return "", errors.New("no answer in time")
			}
			t.tty.WriteString("\nmoat: interrupted; not run\n")
			return "", errInterrupted
		}
	}
}

func (t *ttyApprover) Close() error { return t.tty.Close() }
