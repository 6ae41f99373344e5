package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moatbox/moat/harness"
)

// ttyApprover asks the person at the controlling terminal, as sudo does:
// on /dev/tty, so that it works when stdin and stdout are pipes, and never
// reads an answer from the command's input.
type ttyApprover struct {
	tty *os.File
	// relayed is set once the terminal is the command's (the backend
	// relays it in raw mode): a question then would race the command for
	// the person's keys, so it is refused instead.
	relayed atomic.Bool
	// lines are the terminal's lines, read by one goroutine for every
	// question: a reader left behind by a question that timed out would
	// otherwise take the next answer.
	lines     chan string
	startRead sync.Once
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
	return &ttyApprover{tty: tty, lines: make(chan string)}
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
		return nil, errors.New("the terminal is the command's during an interactive run; run with stdin from a pipe or a file to be asked, or add an allow rule")
	}
	var b strings.Builder
	rule := "the command line"
	if d.Rule != nil {
		rule = "rule " + d.Rule.String()
	}
	if r := a.Request; r != nil {
		what := "a connection (the proxy sees no request inside it)"
		if r.Method != "" {
			what = r.Method + " " + r.Path
		}
		fmt.Fprintf(&b, "\nmoat: %s asks before the command reaches %s:%d:\n  request: %s\n  reason: %s\n", rule, r.Host, r.Port, what, d.Reason)
		b.WriteString("Let it through? [y] once, [s] all this rule asks for this run, [N] no: ")
	} else {
		fmt.Fprintf(&b, "\nmoat: %s asks before this runs:\n", rule)
		fmt.Fprintf(&b, "  command: %q\n", a.Argv)
		if len(d.Command) > 0 && !equalArgv(d.Command, a.Argv) {
			fmt.Fprintf(&b, "  because of: %q\n", d.Command)
		}
		fmt.Fprintf(&b, "  in: %s\n  reason: %s\n", a.Dir, d.Reason)
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

// ask writes a question and returns the next line typed, trimmed.
func (t *ttyApprover) ask(ctx context.Context, question string) (string, error) {
	if _, err := t.tty.WriteString(question); err != nil {
		return "", err
	}
	t.startRead.Do(func() {
		go func() {
			r := bufio.NewReader(t.tty)
			for {
				line, err := r.ReadString('\n')
				if err != nil && line == "" {
					close(t.lines)
					return
				}
				t.lines <- strings.TrimSpace(line)
			}
		}()
	})
	select {
	case line, ok := <-t.lines:
		if !ok {
			return "", errors.New("the terminal closed")
		}
		return line, nil
	case <-ctx.Done():
		t.tty.WriteString("\nmoat: no answer in time; not run\n")
		return "", ctx.Err()
	}
}

func (t *ttyApprover) Close() error { return t.tty.Close() }
