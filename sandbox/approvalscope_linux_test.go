package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
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
