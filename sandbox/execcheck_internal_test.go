package sandbox

import (
	"context"
	"errors"
	"fmt"
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

// TestDenialNamesTheProgram: a refused exec whose argv names another
// program, or nothing, is reported by the program decided; the control:
// an ordinary exec is reported by its argv.
func TestDenialNamesTheProgram(t *testing.T) {
	p := policy.Default()
	p.Rules = append(p.Rules, policy.Rule{Name: "no-id", Decision: "deny", Match: policy.Match{Command: []string{"id"}}})
	e := &execCheck{rules: harness.New(p), approvals: &harness.Approvals{}, req: &Request{}}
	for _, c := range []backend.ExecCall{
		{Pid: 1, Path: "/usr/bin/id", Argv: []string{"true"}, Resolved: "/usr/bin/id"},
		{Pid: 2, Path: "/proc/self/fd/3", Argv: []string{"true"}, Resolved: "/usr/bin/id"},
		{Pid: 3, Path: "/usr/bin/id", Resolved: "/usr/bin/id"},
		{Pid: 4, Path: "/usr/bin/id", Argv: []string{"id", "-u"}, Resolved: "/usr/bin/id"},
	} {
		if err := answer(e, c); !errors.Is(err, ErrDenied) {
			t.Fatalf("%+v: %v, want it denied", c, err)
		}
	}
	var got []string
	for _, d := range e.report() {
		got = append(got, d.What)
	}
	want := []string{"id (argv: true)", "/usr/bin/id", "id -u"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("denials name %q, want %q", got, want)
	}
}

// TestExecDenialsBounded: a command that is refused ever new argvs makes
// at most maxExecDenials entries, the rest counted in one (each was an
// entry, looked through at every refusal and printed whole; found by a
// tester). The control: a refusal of an argv listed already is counted
// on its own entry.
func TestExecDenialsBounded(t *testing.T) {
	e := &execCheck{rules: harness.New(policy.Default()), approvals: &harness.Approvals{}, req: &Request{}}
	const n = maxExecDenials + 50
	for i := range n {
		argv := []string{"git", "push", "origin", fmt.Sprintf("b%d", i)}
		if err := answer(e, backend.ExecCall{Pid: 10 + i, Path: "/usr/bin/git", Argv: argv}); !errors.Is(err, ErrDenied) {
			t.Fatalf("git push %d: %v, want it refused", i, err)
		}
	}
	answer(e, backend.ExecCall{Pid: 1, Path: "/usr/bin/git", Argv: []string{"git", "push", "origin", "b0"}})
	rep := e.report()
	if len(rep) != maxExecDenials+1 {
		t.Fatalf("%d entries, want %d", len(rep), maxExecDenials+1)
	}
	if rep[0].Count != 2 {
		t.Errorf("control: the first entry counted %d, want 2", rep[0].Count)
	}
	if last := rep[len(rep)-1]; last.What != "other programs" || last.Count != n-maxExecDenials || !strings.Contains(last.Hint, "--audit") {
		t.Errorf("the last entry: %+v, want the other %d", last, n-maxExecDenials)
	}
}
