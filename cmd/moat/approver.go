package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

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
}

// newTTYApprover returns an approver on the controlling terminal, or nil
// when there is none (then an ask refuses the run).
func newTTYApprover() *ttyApprover {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	return &ttyApprover{tty: tty}
}

func (t *ttyApprover) Name() string { return "tty" }

// Approve shows the exact command, where it runs and the rule, and reads
// one answer: y runs it once, anything else (or end of input) refuses.
func (t *ttyApprover) Approve(ctx context.Context, a harness.Action, d harness.Decision) (bool, error) {
	if t.relayed.Load() {
		return false, errors.New("the terminal is the command's during an interactive run; run with stdin from a pipe or a file to be asked, or add an allow rule")
	}
	var b strings.Builder
	rule := "the command line"
	if d.Rule != nil {
		rule = "rule " + d.Rule.String()
	}
	fmt.Fprintf(&b, "\nmoat: %s asks before this runs:\n", rule)
	fmt.Fprintf(&b, "  command: %q\n", a.Argv)
	if len(d.Command) > 0 && !equalArgv(d.Command, a.Argv) {
		fmt.Fprintf(&b, "  because of: %q\n", d.Command)
	}
	fmt.Fprintf(&b, "  in: %s\n  reason: %s\n", a.Dir, d.Reason)
	b.WriteString("Run it once? [y/N] ")
	if _, err := t.tty.WriteString(b.String()); err != nil {
		return false, err
	}
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(t.tty).ReadString('\n')
		answer <- strings.ToLower(strings.TrimSpace(line))
	}()
	select {
	case s := <-answer:
		ok := s == "y" || s == "yes"
		if !ok {
			t.tty.WriteString("moat: not run\n")
		}
		return ok, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (t *ttyApprover) Close() error { return t.tty.Close() }
