//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// execRules deny `uname -n` and ask about `id -u`: programs every guest
// has, so the test needs no git.
const execRules = `
[[rules]]
name = "no-nodename"
match = { command = ["uname", "-n"] }
decision = "deny"
reason = "test: the node name stays inside"

[[rules]]
name = "ask-uid"
match = { command = ["id", "-u"] }
decision = "ask"
reason = "test: a person decides"
`

// execScript runs, from a script file (which the command line does not
// show), a denied program, one asked about, the same programs with
// arguments no rule matches (the positive controls), and the denied one
// again through xargs, a parent that starts it itself as make would.
const execScript = `uname -n; echo "uname -n: $?"
uname -s >/dev/null; echo "uname -s: $?"
echo x | xargs uname -n; echo "xargs uname -n: $?"
id -u >/dev/null; echo "id -u: $?"
id -g >/dev/null; echo "id -g: $?"
`

func execPolicy(t *testing.T, ws string, rules string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("rules.toml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	p.Workspace.Path = ws
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// syncApprover is a fakeApprover safe for the checks' goroutines.
type syncApprover struct {
	mu    sync.Mutex
	yes   bool
	asked [][]string
}

func (a *syncApprover) Name() string { return "test" }

func (a *syncApprover) Approve(_ context.Context, act harness.Action, _ harness.Decision) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, act.Argv)
	return a.yes, nil
}

// TestExecCheck: the command rules hold for the programs a script and a
// make-like parent start inside the sandbox, checked at their execve: a
// denied one fails with EACCES (the shell reports 126) and is in the
// report and the audit stream by its rule; an asked one runs only if the
// approver says yes. Positive control: the same programs with other
// arguments run.
func TestExecCheck(t *testing.T) {
	for _, tt := range []struct {
		name     string
		approver *syncApprover
		idU      string
	}{
		{"no approver", nil, "126"},
		{"refused", &syncApprover{}, "126"},
		{"approved", &syncApprover{yes: true}, "0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.WriteFile(filepath.Join(ws, "run.sh"), []byte(execScript), 0o644); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var recs []audit.Decision
			req := &sandbox.Request{Backend: testBackend(), Policy: execPolicy(t, ws, execRules), Args: []string{"sh", "run.sh"},
				AuditDecision: func(d audit.Decision) error { mu.Lock(); recs = append(recs, d); mu.Unlock(); return nil }}
			if tt.approver != nil {
				req.Approver = tt.approver
			}
			caller := sandbox.CurrentCaller()
			caller.Cwd = ws
			req.Caller = &caller
			var out, errb bytes.Buffer
			rep, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &errb})
			if err != nil {
				t.Fatalf("run: %v\n%s", err, errb.String())
			}
			for _, want := range []string{"uname -n: 126", "uname -s: 0", "xargs uname -n: 126", "id -u: " + tt.idU, "id -g: 0"} {
				if !strings.Contains(out.String(), want+"\n") {
					t.Errorf("output lacks %q:\n%s\nstderr:\n%s", want, out.String(), errb.String())
				}
			}
			if strings.Contains(out.String(), "\n"+"sandbox") || rep.ExitCode != 0 {
				t.Errorf("exit %d, output:\n%s", rep.ExitCode, out.String())
			}
			var nodename int
			for _, d := range rep.Denials {
				if d.Layer == sandbox.LayerRules && strings.HasPrefix(d.What, "uname -n") && strings.Contains(d.Rule, "no-nodename") && d.Errno == "EACCES" {
					nodename += d.Count
				}
			}
			if nodename < 2 {
				t.Errorf("the report does not name the rule for both refused uname -n: %+v", rep.Denials)
			}
			mu.Lock()
			defer mu.Unlock()
			var denied, asked int
			for _, r := range recs {
				if r.At != "exec" {
					t.Errorf("a record not of an exec: %+v", r)
				}
				switch {
				case r.Verdict == "deny" && strings.Contains(r.Rule, "no-nodename"):
					denied++
				case r.Verdict == "ask" && strings.Contains(r.Rule, "ask-uid"):
					asked++
				}
			}
			if denied < 2 || asked != 1 {
				t.Errorf("audit: %d denials, %d asks: %+v", denied, asked, recs)
			}
			if tt.approver != nil && len(tt.approver.asked) != 1 {
				t.Errorf("the approver was asked %q", tt.approver.asked)
			}
		})
	}
}

// TestExecCheckLineApproved: a command line a person approved is not asked
// about again when its programs start; a second run of the same program
// from the line's script is.
func TestExecCheckLineApproved(t *testing.T) {
	ws := t.TempDir()
	ap := &syncApprover{yes: true}
	req := &sandbox.Request{Backend: testBackend(), Policy: execPolicy(t, ws, execRules), Approver: ap,
		Args: []string{"sh", "-c", "id -u >/dev/null; echo first $?"}}
	var out bytes.Buffer
	if _, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "first 0\n" || len(ap.asked) != 1 {
		t.Errorf("output %q, asked %q", out.String(), ap.asked)
	}
}

// TestExecCheckEveryStart: the check holds in the init stage (whose
// listener init hands to moat) and with no seccomp profile (a filter that
// lets every call through carries it), and under a custom profile (on the
// floor under it). Positive control: the allowed program runs in each.
func TestExecCheckEveryStart(t *testing.T) {
	for _, tt := range []struct {
		name    string
		be      backend.Backend
		profile string
	}{
		{"init stage", &native.Backend{InitStage: true}, ""},
		{"unconfined", testBackend(), policy.ProfileUnconfined},
		{"custom profile", testBackend(), "custom"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			p := execPolicy(t, ws, execRules)
			switch tt.profile {
			case "custom":
				prof := filepath.Join(t.TempDir(), "p.json")
				if err := os.WriteFile(prof, []byte(`{"defaultAction": "SCMP_ACT_ALLOW"}`), 0o644); err != nil {
					t.Fatal(err)
				}
				p.Syscalls.Profile = prof
			case "":
			default:
				p.Syscalls.Profile = tt.profile
			}
			var out, errb bytes.Buffer
			rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: tt.be, Policy: p,
				Args: []string{"sh", "-c", "x=-n; uname $x; echo \"uname: $?\"; uname -s >/dev/null; echo \"control: $?\""}}, backend.Stdio{Stdout: &out, Stderr: &errb})
			if err != nil {
				t.Fatalf("run: %v\n%s", err, errb.String())
			}
			if out.String() != "uname: 126\ncontrol: 0\n" {
				t.Errorf("output %q, stderr %q", out.String(), errb.String())
			}
			if len(rep.Denials) == 0 || rep.Denials[len(rep.Denials)-1].Layer != sandbox.LayerRules {
				t.Errorf("denials %+v", rep.Denials)
			}
		})
	}
}

// scopedApprover answers with a grant of its scope, or, with wait set,
// waits until the ask times out.
type scopedApprover struct {
	syncApprover
	scope harness.Scope
	wait  bool
}

func (a *scopedApprover) ApproveScoped(ctx context.Context, act harness.Action, d harness.Decision) (*harness.Grant, error) {
	a.Approve(ctx, act, d)
	if a.wait {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	g, err := harness.NewGrant(a.scope, act, d, d.Command, time.Hour, "test", time.Now())
	return &g, err
}

// TestScopedApprovals: a prefix or session approval lets the same command
// start again without asking, until the run ends; a once approval does
// not; an ask nobody answers times out and refuses. Every outcome is an
// audit record with its scope and expiry.
func TestScopedApprovals(t *testing.T) {
	for _, tt := range []struct {
		name    string
		ap      *scopedApprover
		out     string
		asked   int
		outcome string
	}{
		{"once", &scopedApprover{scope: harness.ScopeOnce}, "0 0 0\n", 3, sandbox.ApprovalApproved},
		{"prefix", &scopedApprover{scope: harness.ScopePrefix}, "0 0 0\n", 1, sandbox.ApprovalApproved},
		{"session", &scopedApprover{scope: harness.ScopeSession}, "0 0 0\n", 1, sandbox.ApprovalApproved},
		{"timeout", &scopedApprover{wait: true}, "126 126 126\n", 1, sandbox.ApprovalTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			p := execPolicy(t, ws, execRules+"\n[harness]\nask_timeout = \"200ms\"\n")
			var mu sync.Mutex
			var recs []audit.Decision
			req := &sandbox.Request{Backend: testBackend(), Policy: p, Approver: tt.ap,
				AuditDecision: func(d audit.Decision) error { mu.Lock(); recs = append(recs, d); mu.Unlock(); return nil },
				Args:          []string{"sh", "-c", `id -u >/dev/null; a=$?; x=-u; id $x >/dev/null; b=$?; id $x >/dev/null; echo $a $b $?`}}
			var out bytes.Buffer
			if _, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out}); err != nil {
				if tt.name != "timeout" {
					t.Fatal(err)
				}
				// The line itself asks (id -u is written out): refused.
				if !errors.Is(err, sandbox.ErrDenied) || !strings.Contains(err.Error(), "ask_timeout") {
					t.Fatalf("timed-out line: %v", err)
				}
			} else if out.String() != tt.out {
				t.Errorf("output %q, want %q", out.String(), tt.out)
			}
			if len(tt.ap.asked) != tt.asked {
				t.Errorf("asked %d times, want %d: %q", len(tt.ap.asked), tt.asked, tt.ap.asked)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range recs {
				if r.Verdict != "ask" || r.Outcome == "" {
					continue
				}
				if r.Outcome != tt.outcome || r.Approver != "test" && r.Outcome != sandbox.ApprovalApproved {
					t.Errorf("record %+v, want outcome %q by test", r, tt.outcome)
				}
				if r.Outcome == sandbox.ApprovalApproved && (r.Scope == "" || r.Scope != string(harness.ScopeOnce) && r.Expires == nil) {
					t.Errorf("approved record without its scope and expiry: %+v", r)
				}
			}
		})
	}
}

// noExecCheck is a backend that cannot check execs, as the native one on
// a kernel before 5.5: it refuses every run with command rules.
type noExecCheck struct{}

func (noExecCheck) Name() string                       { return "no-exec-check" }
func (noExecCheck) Capabilities() backend.Capabilities { return backend.Capabilities{} }
func (noExecCheck) Run(_ context.Context, _ *backend.Spec, s backend.Stdio) (*backend.ExitStatus, error) {
	if s.CheckExec != nil {
		return nil, fmt.Errorf("%w: this backend has none", backend.ErrNoExecCheck)
	}
	return &backend.ExitStatus{Cause: backend.CauseExit}, nil
}

// TestExecCheckRefusedWhereItCannotHold: a backend that cannot check each
// exec refuses a policy with command rules, naming what is missing, and
// leaves no change set behind; with no command rule, it runs.
func TestExecCheckRefusedWhereItCannotHold(t *testing.T) {
	ws := t.TempDir()
	p := execPolicy(t, ws, execRules)
	p.Workspace.Mode = policy.WorkspaceOverlay
	rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: noExecCheck{}, Policy: p, Args: []string{"true"}}, backend.Stdio{})
	if !errors.Is(err, sandbox.ErrRefused) || !errors.Is(err, backend.ErrNoExecCheck) || rep.ExitCode != 125 || rep.ChangeSet != nil {
		t.Fatalf("refused run: %v (exit %d, change set %+v)", err, rep.ExitCode, rep.ChangeSet)
	}
	p = execPolicy(t, ws, "[harness]\nbuiltin = []\n")
	if _, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: noExecCheck{}, Policy: p, Args: []string{"true"}}, backend.Stdio{}); err != nil {
		t.Fatalf("run without rules: %v", err)
	}
}

// TestExecCheckLongArgv: a rule about a command's last word holds however
// many words come before it (the exec check reads argv whole, as far as
// execve takes it: it used to stop at 4096). Positive control: the same
// long argv without that word runs.
func TestExecCheckLongArgv(t *testing.T) {
	ws := t.TempDir()
	script := `a=""; i=0; while [ $i -lt 5000 ]; do a="$a -c"; i=$((i+1)); done
/bin/true $a deny-me; echo "long deny-me: $?"
/bin/true $a; echo "long control: $?"
`
	// From a script file, which the command line does not show.
	rep, out, stderr := runScript(t, ws, `
[[rules]]
name = "no-last"
match.command_regex = '^true( \S+)* deny-me$'
decision = "deny"
`, script)
	if out != "long deny-me: 126\nlong control: 0\n" {
		t.Errorf("output %q, stderr %q", out, stderr)
	}
	if len(rep.Denials) == 0 || !strings.Contains(rep.Denials[len(rep.Denials)-1].Rule, "no-last") {
		t.Errorf("denials %+v", rep.Denials)
	}
}

// gitAliasScript defines git aliases where the command line cannot show
// them (the repository's config, GIT_CONFIG_* in the environment) and
// runs them: git runs an alias of a built-in command as a child `git
// push`, which the check of each exec sees. Positive control: an alias
// of git status runs.
const gitAliasScript = `git init -q r && cd r || exit 1
git config alias.s status && git config alias.p push || exit 1
git s >/dev/null; echo "git s: $?"
git p origin main 2>/dev/null; echo "git p: $?"
GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.q GIT_CONFIG_VALUE_0=push git q origin 2>/dev/null; echo "git q: $?"
`

// TestExecCheckGitAlias: the built-in set's git-push refuses the push an
// alias from a config file or the environment runs (nobody to ask).
func TestExecCheckGitAlias(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "run.sh"), []byte(gitAliasScript), 0o644); err != nil {
		t.Fatal(err)
	}
	p := execPolicy(t, ws, "")
	if len(p.Harness.Builtin) == 0 {
		t.Fatal("the built-in set is off by default")
	}
	req := &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"sh", "run.sh"}}
	caller := sandbox.CurrentCaller()
	caller.Cwd = ws
	req.Caller = &caller
	var out, errb bytes.Buffer
	rep, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "git s: 0\n") {
		t.Errorf("the alias of git status did not run:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	var pushes int
	for _, d := range rep.Denials {
		if d.Layer == sandbox.LayerRules && strings.Contains(d.What, "git push") && strings.Contains(d.Rule, "git-push") {
			pushes += d.Count
		} else if d.Layer == sandbox.LayerRules {
			t.Errorf("refused: %+v", d)
		}
	}
	if pushes != 2 {
		t.Errorf("%d pushes refused, want 2 (git p, git q): %+v\noutput:\n%s\nstderr:\n%s", pushes, rep.Denials, out.String(), errb.String())
	}
}

// TestGitAutocorrectFromEnvironment: git's autocorrection given in the
// environment on the line runs push inside git's own process, where no
// exec of git push is seen (a tester's: GIT_CONFIG_PARAMETERS with
// help.autocorrect pushed unasked); the line is asked about as the git -c
// it stands for, and refused with nobody to ask, before anything runs.
// The control: the same line with another setting pushes nothing and
// runs.
func TestGitAutocorrectFromEnvironment(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	const setup = `git init -q --bare b.git && git init -q r && cd r && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m one && git remote add origin ../b.git && `
	for _, tc := range []struct {
		setting string
		refused bool
	}{{"'help.autocorrect'='immediate'", true}, {"'core.pager'='cat'", false}} {
		ws := t.TempDir()
		line := setup + `GIT_CONFIG_PARAMETERS="` + tc.setting + `" git psuh origin HEAD:refs/heads/viaenv; echo ran`
		req := &sandbox.Request{Backend: testBackend(), Policy: execPolicy(t, ws, ""), Args: []string{"bash", "-c", line}}
		caller := sandbox.CurrentCaller()
		caller.Cwd = ws
		req.Caller = &caller
		var out, errb bytes.Buffer
		rep, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &errb})
		if _, serr := os.Stat(filepath.Join(ws, "b.git", "refs", "heads", "viaenv")); serr == nil {
			t.Errorf("%s: the push landed", tc.setting)
		}
		ran := strings.Contains(out.String(), "ran")
		if tc.refused && (ran || err == nil && (rep == nil || len(rep.Denials) == 0)) {
			t.Errorf("%s: ran %v, err %v, report %+v: want the line refused\n%s", tc.setting, ran, err, rep, errb.String())
		}
		if !tc.refused && (!ran || err != nil) {
			t.Errorf("control %s: ran %v, err %v\n%s", tc.setting, ran, err, errb.String())
		}
	}
}

// dirApprover says yes and remembers the directory of each ask.
type dirApprover struct {
	mu   sync.Mutex
	dirs []string
}

func (a *dirApprover) Name() string { return "test" }

func (a *dirApprover) Approve(_ context.Context, act harness.Action, _ harness.Decision) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dirs = append(a.dirs, act.Dir)
	return true, nil
}

// TestExecAskNamesTheCallersDir: a program a script starts is asked
// about, approved and audited in the directory it runs in, not the
// run's: a script that changed directory before a push was shown (and
// approved for) the run's (found by a tester). The control: the one
// asked in the run's directory names that.
func TestExecAskNamesTheCallersDir(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "run.sh"), []byte("mkdir -p sub && cd sub && id -u >/dev/null; cd .. && id -u >/dev/null\n"), 0o644)
	var mu sync.Mutex
	var dirs []string
	ap := &dirApprover{}
	req := &sandbox.Request{Backend: testBackend(), Policy: execPolicy(t, ws, execRules), Args: []string{"sh", "run.sh"}, Approver: ap,
		AuditDecision: func(d audit.Decision) error {
			if d.At == "exec" {
				mu.Lock()
				dirs = append(dirs, d.Dir)
				mu.Unlock()
			}
			return nil
		}}
	caller := sandbox.CurrentCaller()
	caller.Cwd = ws
	req.Caller = &caller
	var out, errb bytes.Buffer
	if _, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	want := []string{filepath.Join(ws, "sub"), ws}
	if !slices.Equal(ap.dirs, want) {
		t.Errorf("asked in %q, want %q", ap.dirs, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(dirs, want) {
		t.Errorf("audited in %q, want %q", dirs, want)
	}
}

// firstYes approves the first ask only.
type firstYes struct{ syncApprover }

func (a *firstYes) Approve(ctx context.Context, act harness.Action, d harness.Decision) (bool, error) {
	a.syncApprover.Approve(ctx, act, d)
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.asked) == 1, nil
}

// TestLineGrantBoundToDir: approving a line lets each command it asks
// about start once in the directory the person was shown: a script the
// line runs cannot spend it on the same words in another directory (a
// push from another repository) before the line's own command.
func TestLineGrantBoundToDir(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "s.sh"), []byte("id -u >/dev/null; echo script $?\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := execPolicy(t, ws, execRules)
	ap := &firstYes{}
	req := &sandbox.Request{Backend: testBackend(), Policy: p, Approver: ap,
		Args: []string{"sh", "-c", `mkdir -p sub && cd sub && sh ../s.sh; cd ..; id -u >/dev/null; echo line $?`}}
	var out bytes.Buffer
	if _, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	// The script's id -u, in sub, is asked about (and refused); the
	// line's own, where the person was shown, runs on the approval.
	if got := out.String(); got != "script 126\nline 0\n" {
		t.Errorf("output %q, want the script's id -u refused and the line's run (asked %q)", got, ap.asked)
	}
	if len(ap.asked) != 2 {
		t.Errorf("asked %d times, want 2 (the line, the script's command in sub): %q", len(ap.asked), ap.asked)
	}

	// A directory whose path the kernel will not name (longer than
	// PATH_MAX) is no directory a grant is for: the run's stood in for
	// it before, and the deep script spent the line's grant.
	// (perl: a shell's cd refuses a path that long.)
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("needs perl for the deep directory")
	}
	n := strings.Repeat("d", 200)
	deep := `for (1..25) { mkdir "` + n + `"; chdir "` + n + `" or exit 9 } open(STDOUT, ">/dev/null"); exit(system("id", "-u") == 0 ? 0 : 1)`
	if err := os.WriteFile(filepath.Join(ws, "deep.pl"), []byte(deep), 0o644); err != nil {
		t.Fatal(err)
	}
	ap = &firstYes{}
	req = &sandbox.Request{Backend: testBackend(), Policy: p, Approver: ap,
		Args: []string{"sh", "-c", `perl deep.pl; echo script $?; id -u >/dev/null; echo line $?`}}
	out.Reset()
	if _, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "script 1\nline 0\n" {
		t.Errorf("from a directory too deep to name: output %q, want the script's id -u refused and the line's run (asked %q)", got, ap.asked)
	}
}

// TestDeleteOutsideFromOutsideDir: rm -rf of a relative path from a
// read_write directory outside the workspace is asked about at its exec
// (a tester's cd /data && rm -rf sub deleted the host's data unasked);
// without an approver it is refused and the data stays. The control: the
// same deletion in the workspace runs.
func TestDeleteOutsideFromOutsideDir(t *testing.T) {
	ws, data := t.TempDir(), t.TempDir()
	for _, d := range []string{filepath.Join(ws, "sub"), filepath.Join(data, "sub")} {
		if err := os.MkdirAll(filepath.Join(d, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := execPolicy(t, ws, "")
	p.Filesystem.ReadWrite = []string{data}
	out, errb := runFromWorkspace(t, ws, p, "rm -rf sub; cd "+data+" && rm -rf sub; echo done")
	if _, err := os.Stat(filepath.Join(ws, "sub")); err == nil {
		t.Errorf("control: rm -rf sub in the workspace did not run:\n%s%s", out.String(), errb.String())
	}
	if _, err := os.Stat(filepath.Join(data, "sub", "x")); err != nil {
		t.Errorf("rm -rf sub from the read_write directory ran unasked: %v\n%s%s", err, out.String(), errb.String())
	}
}

// TestScriptFileByAnyName: a rule about a script decides a shell started
// on it by any name (a tester's: execv("/bin/bash", ["x", "deploy.sh"]),
// and sh d where d is a link to it, ran the denied script; so did busybox
// sh deploy.sh from a script, where no line shows it). The control:
// another script runs.
func TestScriptFileByAnyName(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "deploy.sh"), []byte("echo DEPLOYED\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "other.sh"), []byte("echo OTHER\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "bb.sh"), []byte("busybox sh deploy.sh\nbusybox ash -e deploy.sh\nexec -a -sh busybox deploy.sh\n"), 0o644)
	// Without the built-in rules, which ask about busybox's shell (it
	// could run any applet) and would refuse it here for want of an
	// answer: the deny alone must hold.
	p := execPolicy(t, ws, "[harness]\nbuiltin = []\n\n[[rules]]\nmatch = { command = [\"deploy.sh\"] }\ndecision = \"deny\"\n")
	script := `python3 -c 'import os; os.execv("/bin/bash", ["x", "deploy.sh"])'; ln -s deploy.sh d; sh d; sh other.sh`
	if _, err := exec.LookPath("busybox"); err == nil {
		script += "; bash bb.sh"
	} else {
		t.Log("busybox is not installed here: its shell applet is not tried")
	}
	out, errb := runFromWorkspace(t, ws, p, script)
	if strings.Contains(out.String(), "DEPLOYED") || !strings.Contains(out.String(), "OTHER") {
		t.Errorf("output %q: want the denied script refused by every name, the other run\n%s", out.String(), errb.String())
	}
}

// TestStartupFileAtExec: a shell a script starts with --rcfile or
// --init-file sources that file, decided as source FILE and as the
// program it is, by its name and through a link (a tester's: bash
// --rcfile deploy.sh -i -c true in a script ran the denied script, no
// line showing it). The control: another file is sourced.
func TestStartupFileAtExec(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "deploy.sh"), []byte("echo DEPLOYED\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "other.sh"), []byte("echo OTHER\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "s.sh"), []byte("bash --rcfile deploy.sh -i -c true\nln -s deploy.sh d\nbash --init-file d -i -c true\nbash --rcfile other.sh -i -c true\n"), 0o644)
	p := execPolicy(t, ws, "[harness]\nbuiltin = []\n\n[[rules]]\nmatch = { command = [\"deploy.sh\"] }\ndecision = \"deny\"\n")
	out, errb := runFromWorkspace(t, ws, p, "bash s.sh < /dev/null")
	if strings.Contains(out.String(), "DEPLOYED") || !strings.Contains(out.String(), "OTHER") {
		t.Errorf("output %q: want the denied file refused as a startup file by both names, the other sourced\n%s", out.String(), errb.String())
	}
}

// runFromWorkspace runs sh -c script under p from the workspace ws with
// the test's backend, and returns its output.
func runFromWorkspace(t *testing.T, ws string, p *policy.Policy, script string) (out, errb *bytes.Buffer) {
	t.Helper()
	req := &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"sh", "-c", script}}
	caller := sandbox.CurrentCaller()
	caller.Cwd = ws
	req.Caller = &caller
	out, errb = &bytes.Buffer{}, &bytes.Buffer{}
	if _, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: out, Stderr: errb}); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	return out, errb
}

// TestExecCheckPreload: a program a rule names, started with code for
// the dynamic loader to load into it (LD_PRELOAD, LD_AUDIT,
// LD_LIBRARY_PATH, the loader's own --preload and --library-path), is
// decided as the rule says whatever its arguments (found by testers:
// LD_PRELOAD=./pre.so git status rewrote its argv to push before git's
// main, and so did a planted libz.so.1 under LD_LIBRARY_PATH and ld.so
// --preload, and an empty entry of LD_LIBRARY_PATH, which the loader
// reads as the working directory). Refused here: uname -s so, in a script
// and as the command line itself (the policy's environment). The
// controls: uname -s without it, directly and through the loader, with
// LD_LIBRARY_PATH set to the system's own library directory (what only
// the host's root writes: a CUDA or JDK set-up exports one), and true,
// which no rule names, with it, run.
func TestExecCheckPreload(t *testing.T) {
	ws := t.TempDir()
	script := `LD_PRELOAD=/nonexistent.so uname -s >/dev/null 2>&1; echo "preloaded: $?"
LD_AUDIT=/nonexistent.so uname -s >/dev/null 2>&1; echo "audited: $?"
LD_LIBRARY_PATH=/nonexistent uname -s >/dev/null 2>&1; echo "library path: $?"
ld=$(ls /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1 2>/dev/null | head -n 1)
$ld --preload /nonexistent.so /bin/uname -s >/dev/null 2>&1; echo "loader preload: $?"
$ld --library-path /nonexistent /bin/uname -s >/dev/null 2>&1; echo "loader library path: $?"
$ld /bin/uname -s >/dev/null; echo "loader control: $?"
uname -s >/dev/null; echo "control: $?"
LD_PRELOAD=/nonexistent.so true 2>/dev/null; echo "other: $?"
LD_LIBRARY_PATH=: uname -s >/dev/null 2>&1; echo "separators: $?"
LD_LIBRARY_PATH=/usr/lib: uname -s >/dev/null 2>&1; echo "system and empty: $?"
LD_LIBRARY_PATH='/usr/lib/$LIB' uname -s >/dev/null 2>&1; echo "system and a token: $?"
LD_LIBRARY_PATH=/usr/lib/../tmp uname -s >/dev/null 2>&1; echo "system and dots: $?"
LD_LIBRARY_PATH=/usr/lib uname -s >/dev/null; echo "system: $?"
`
	if err := os.WriteFile(filepath.Join(ws, "run.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: execPolicy(t, ws, execRules), Args: []string{"sh", "run.sh"}},
		backend.Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	for _, want := range []string{"preloaded: 126", "audited: 126", "library path: 126", "loader preload: 126", "loader library path: 126",
		"loader control: 0", "control: 0", "other: 0",
		"separators: 126", "system and empty: 126", "system and a token: 126", "system and dots: 126", "system: 0"} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("output lacks %q:\n%s\nstderr:\n%s", want, out.String(), errb.String())
		}
	}
	found := false
	for _, d := range rep.Denials {
		found = found || d.Layer == sandbox.LayerRules && strings.Contains(d.Rule, "no-nodename") && strings.Contains(d.Rule+d.Hint+d.What, "LD_PRELOAD")
	}
	if !found {
		t.Errorf("no denial names the preload: %+v", rep.Denials)
	}

	// The command line's own program, given it by the policy's
	// environment.
	p := execPolicy(t, ws, execRules)
	p.Env.Set = map[string]string{"LD_PRELOAD": "/nonexistent.so"}
	out.Reset()
	errb.Reset()
	rep, err = sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"uname", "-s"}},
		backend.Stdio{Stdout: &out, Stderr: &errb})
	refused := false
	for _, d := range rep.Denials {
		refused = refused || d.Layer == sandbox.LayerRules && strings.Contains(d.Rule, "no-nodename") && strings.Contains(d.Rule+d.Hint+d.What, "LD_PRELOAD")
	}
	if rep.ExitCode != 126 || strings.Contains(out.String(), "Linux") || !refused {
		t.Errorf("uname -s as the line, preloaded: exit %d, %v, %q %q %+v", rep.ExitCode, err, out.String(), errb.String(), rep.Denials)
	}

	// The system's own library directory, as a CUDA or JDK set-up
	// exports it for every program: the line runs.
	p.Env.Set = map[string]string{"LD_LIBRARY_PATH": "/usr/lib"}
	out.Reset()
	errb.Reset()
	rep, err = sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"uname", "-s"}},
		backend.Stdio{Stdout: &out, Stderr: &errb})
	if err != nil || rep.ExitCode != 0 || !strings.Contains(out.String(), "Linux") {
		t.Errorf("uname -s as the line, with the system's library path: exit %d, %v, %q %q %+v", rep.ExitCode, err, out.String(), errb.String(), rep.Denials)
	}
}
