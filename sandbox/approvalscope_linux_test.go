package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/sandbox"
)

// prefixApprover approves its first ask for the prefix of its program
// alone (a person who answers p and types "find"), and refuses every
// ask after it.
type prefixApprover struct{ syncApprover }

func (a *prefixApprover) ApproveScoped(ctx context.Context, act harness.Action, d harness.Decision) (*harness.Grant, error) {
	a.Approve(ctx, act, d)
	a.mu.Lock()
	n := len(a.asked)
	a.mu.Unlock()
	if n > 1 {
		return nil, errors.New("refused")
	}
	g, err := harness.NewGrant(harness.ScopePrefix, act, d, d.Command[:1], time.Hour, "test", time.Now())
	return &g, err
}

// TestPrefixApprovalCoversItsCommandOnly: a prefix approval of a session
// lets a later line through for the command it names, not for another
// command the rules ask about that the line runs through it (find's
// -exec): that one is asked about, and refused here. Positive control:
// the same find without it runs unasked.
func TestPrefixApprovalCoversItsCommandOnly(t *testing.T) {
	ws := t.TempDir()
	p := execPolicy(t, ws, execRules+`
[[rules]]
name = "ask-find"
match = { command = ["find"] }
decision = "ask"
reason = "test: find may delete"
`)
	ap := &prefixApprover{}
	s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: p, Approver: ap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		_, err := s.Exec(context.Background(), &sandbox.ExecRequest{Args: args}, backend.Stdio{Stdout: &out, Stderr: &out})
		return out.String(), err
	}
	if out, err := run("find", "/", "-maxdepth", "0"); err != nil || out != "/\n" {
		t.Fatalf("approved find: %q, %v", out, err)
	}
	if out, err := run("find", "/", "-maxdepth", "0", "-name", "/"); err != nil || out != "/\n" || len(ap.asked) != 1 {
		t.Fatalf("find under its prefix approval: %q, %v, asked %q", out, err, ap.asked)
	}
	out, err := run("find", "/", "-maxdepth", "0", "-exec", "id", "-u", ";")
	if !errors.Is(err, sandbox.ErrDenied) || len(ap.asked) != 2 || !slices.Equal(ap.asked[1][:2], []string{"find", "/"}) {
		t.Errorf("find -exec id -u under a prefix approval of find: output %q, error %v, asked %q; want asked and refused", out, err, ap.asked)
	}
}

// ruleApprover records the rule of each decision it is asked about, and
// approves each for its rule, for the session.
type ruleApprover struct {
	mu    sync.Mutex
	rules []string
}

func (a *ruleApprover) Name() string { return "test" }

func (a *ruleApprover) Approve(ctx context.Context, act harness.Action, d harness.Decision) (bool, error) {
	_, err := a.ApproveScoped(ctx, act, d)
	return err == nil, err
}

func (a *ruleApprover) ApproveScoped(ctx context.Context, act harness.Action, d harness.Decision) (*harness.Grant, error) {
	a.mu.Lock()
	a.rules = append(a.rules, d.Rule.Name+" "+strings.Join(d.Command, " "))
	a.mu.Unlock()
	g, err := harness.NewGrant(harness.ScopeSession, act, d, nil, time.Hour, "test", time.Now())
	return &g, err
}

// TestAskNamesTheUncoveredCommand: a line with two commands the rules ask
// about, the first of which a session's approval covers already, is
// asked about for the second: the question named the covered one and its
// rule before, so a person approving "that rule" let the other through
// (tried). The control: the first line asks about its own command.
func TestAskNamesTheUncoveredCommand(t *testing.T) {
	p := execPolicy(t, t.TempDir(), `
[harness]
builtin = []

[[rules]]
name = "ask-date"
match = { command = ["date"] }
decision = "ask"

[[rules]]
name = "ask-tac"
match = { command = ["tac"] }
decision = "ask"
`)
	ap := &ruleApprover{}
	s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: p, Approver: ap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	for _, args := range [][]string{{"date", "-u"}, {"sh", "-c", "date +%s; echo x | tac"}, {"sh", "-c", "date; tac </dev/null"}} {
		var out bytes.Buffer
		if _, err := s.Exec(context.Background(), &sandbox.ExecRequest{Args: args}, backend.Stdio{Stdout: &out, Stderr: &out}); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out.String())
		}
	}
	if want := []string{"ask-date date -u", "ask-tac tac"}; !slices.Equal(ap.rules, want) {
		t.Errorf("asked about %q, want %q", ap.rules, want)
	}
}
