package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
)

// answer is what check says about c: nil, or the error of its pending
// decision.
func answer(e *execCheck, c backend.ExecCall) error {
	err := e.check(c)
	var p *backend.ExecPending
	if errors.As(err, &p) {
		return p.Wait(context.Background())
	}
	return err
}

// TestExecCheckTruncated: an exec whose argv the backend read only in
// part (Truncated) is refused when the rules allow the part they saw, a
// word past it could be the one a rule is about; the report says why.
// Positive control: the same prefix, read whole, runs.
func TestExecCheckTruncated(t *testing.T) {
	e := &execCheck{rules: harness.New(policy.Default()), approvals: &harness.Approvals{}, req: &Request{}}
	argv := []string{"git", "-c", "a.b=c", "-c", "a.b=c"}
	if err := answer(e, backend.ExecCall{Pid: 1, Path: "/usr/bin/git", Argv: argv}); err != nil {
		t.Fatalf("the whole argv: %v, want it allowed", err)
	}
	err := answer(e, backend.ExecCall{Pid: 1, Path: "/usr/bin/git", Argv: argv, Truncated: true})
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), ReasonArgvTooLong) {
		t.Fatalf("a truncated argv: %v, want it denied as too long to check", err)
	}
	rep := e.report()
	if len(rep) != 1 || rep[0].Layer != LayerRules || rep[0].Errno != "EACCES" || !strings.Contains(rep[0].Rule, ReasonArgvTooLong) {
		t.Errorf("report %+v, want one denial naming why", rep)
	}
	// A prefix the rules already ask about is decided as it is.
	err = answer(e, backend.ExecCall{Pid: 2, Path: "/usr/bin/git", Argv: []string{"git", "push"}, Truncated: true})
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "an ask nobody could answer") {
		t.Errorf("a truncated git push: %v, want the ask refused", err)
	}
}

// TestExecGrantMatchesDecidedArgv: a prefix approval is matched against
// the words that decided, not argv alone: execve("/usr/bin/git",
// ["curl", "push"]) is decided as git push, and a prefix approved for
// curl does not let it through. Positive control: curl itself, which the
// built-in http-write rule asks about, runs under that approval.
func TestExecGrantMatchesDecidedArgv(t *testing.T) {
	ap := &harness.Approvals{}
	ap.Add(harness.Grant{Scope: harness.ScopePrefix, Argv: []string{"curl"}, By: "test"})
	e := &execCheck{rules: harness.New(policy.Default()), approvals: ap, req: &Request{}}
	if err := answer(e, backend.ExecCall{Pid: 1, Path: "/usr/bin/curl", Argv: []string{"curl", "-d", "x", "https://example.com"}}); err != nil {
		t.Fatalf("curl -d under a curl prefix approval: %v, want it let through", err)
	}
	err := answer(e, backend.ExecCall{Pid: 2, Path: "/usr/bin/git", Argv: []string{"curl", "push", "origin"}})
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("git started as curl push: %v, want it refused (asked, nobody to answer)", err)
	}
	if rep := e.report(); len(rep) != 1 || !strings.Contains(rep[0].Rule, "git-push") {
		t.Errorf("report %+v, want the git-push rule", rep)
	}
}
