//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// sessionGit is a workspace with a stand-in git (bin/git, which prints
// its words) and run.sh, a script that runs `git push` and `git status`:
// the command line sent to the session shows neither.
func sessionGit(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"bin/git": "#!/bin/sh\necho \"ran git $*\"\n",
		"run.sh":  "git push; echo \"git push: $?\"\ngit status >/dev/null; echo \"git status: $?\"\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// gitSession is a session over ws whose rules deny deny (an argv
// prefix), without the built-in rule set, auditing into recs.
func gitSession(t *testing.T, ws string, deny []string, ap sandbox.Approver, recs *auditLog) *sandbox.Session {
	t.Helper()
	p := policy.Default()
	p.Workspace.Path = ws
	p.Harness.Builtin = nil
	p.Rules = append(p.Rules,
		policy.Rule{Name: "no-push", Match: policy.Match{Command: deny}, Decision: "deny", Reason: "test: pushes stay inside"},
		policy.Rule{Name: "ask-uid", Match: policy.Match{Command: []string{"id", "-u"}}, Decision: "ask", Reason: "test: a person decides"})
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: p, Approver: ap, AuditDecision: recs.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

type auditLog struct {
	mu   sync.Mutex
	recs []audit.Decision
}

func (l *auditLog) add(d audit.Decision) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, d)
	return nil
}

// find returns the records of an exec of rule in run.
func (l *auditLog) find(run, rule string) []audit.Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []audit.Decision
	for _, r := range l.recs {
		if r.At == "exec" && r.RunID == run && strings.Contains(r.Rule, rule) {
			out = append(out, r)
		}
	}
	return out
}

func gitExec(t *testing.T, s *sandbox.Session, ws, script string, ap sandbox.Approver) (string, *sandbox.Report) {
	t.Helper()
	var out bytes.Buffer
	req := &sandbox.ExecRequest{Args: []string{"sh", "-c", script}, Env: []string{"PATH=" + ws + "/bin:/usr/bin:/bin"}, Approver: ap}
	rep, err := s.Exec(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("exec %q: %v\n%s", script, err, out.String())
	}
	return out.String(), rep
}

// TestSessionExecCheck: in a session, the command rules hold for what a
// script starts, as in a Run: `git push` run by a script file is refused
// (EACCES: the shell says 126) by a deny rule, in the command's report
// and in the audit stream under the command's run id; with the rule
// about another command (the positive control), the same script pushes.
func TestSessionExecCheck(t *testing.T) {
	ws := sessionGit(t)
	for _, tt := range []struct {
		name string
		deny []string
		want string
	}{
		{"denied", []string{"git", "push"}, "git push: 126"},
		{"control", []string{"git", "fetch"}, "ran git push\ngit push: 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var recs auditLog
			s := gitSession(t, ws, tt.deny, nil, &recs)
			out, rep := gitExec(t, s, ws, "sh run.sh", nil)
			if !strings.Contains(out, tt.want+"\n") || !strings.Contains(out, "git status: 0\n") {
				t.Errorf("output lacks %q (or git status: 0):\n%s", tt.want, out)
			}
			var denied int
			for _, d := range rep.Denials {
				if d.Layer == sandbox.LayerRules && strings.HasPrefix(d.What, "git push") && strings.Contains(d.Rule, "no-push") && d.Errno == "EACCES" {
					denied += d.Count
				}
			}
			recorded := len(recs.find(rep.RunID, "no-push"))
			if tt.name == "denied" && (denied != 1 || recorded != 1) {
				t.Errorf("refused push: %d in the report (%+v), %d in the audit stream", denied, rep.Denials, recorded)
			}
			if tt.name == "control" && (denied != 0 || recorded != 0) {
				t.Errorf("control: %+v, %d audited", rep.Denials, recorded)
			}
		})
	}
}

// TestSessionExecCheckBackground: a program a command left in the
// background starts after the command has ended is still checked, and
// attributed to that command: its audit record carries the command's run
// id, and the ask it meets goes to that command's approver, not the
// session's. Positive control: the allowed programs of the same
// background script run.
func TestSessionExecCheckBackground(t *testing.T) {
	ws := sessionGit(t)
	var recs auditLog
	sessionAp := &syncApprover{yes: true}
	s := gitSession(t, ws, []string{"git", "push"}, sessionAp, &recs)
	execAp := &syncApprover{}
	bg := "sleep 0.3; sh run.sh; id -u >/dev/null; echo \"id -u: $?\"; id -g >/dev/null; echo \"id -g: $?\"\n"
	if err := os.WriteFile(filepath.Join(ws, "bg.sh"), []byte(bg), 0o644); err != nil {
		t.Fatal(err)
	}
	_, rep := gitExec(t, s, ws, "sh bg.sh >/tmp/bg.out 2>&1 &", execAp)
	deadline := time.Now().Add(10 * time.Second)
	var out string
	for time.Now().Before(deadline) {
		o, _ := gitExec(t, s, ws, "cat /tmp/bg.out 2>/dev/null", nil)
		if out = o; strings.Contains(out, "id -g:") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{"git push: 126", "git status: 0", "id -u: 126", "id -g: 0"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("background output lacks %q:\n%s", want, out)
		}
	}
	if n := len(recs.find(rep.RunID, "no-push")); n != 1 {
		t.Errorf("the background push is audited %d times under its command's run id %s: %+v", n, rep.RunID, recs.recs)
	}
	asks := recs.find(rep.RunID, "ask-uid")
	if len(asks) != 1 || asks[0].Outcome != sandbox.ApprovalDenied {
		t.Errorf("the background id -u: %+v", asks)
	}
	execAp.mu.Lock()
	sessionAp.mu.Lock()
	defer execAp.mu.Unlock()
	defer sessionAp.mu.Unlock()
	if len(execAp.asked) != 1 || len(sessionAp.asked) != 0 {
		t.Errorf("asked: the command's approver %q, the session's %q", execAp.asked, sessionAp.asked)
	}
}

// TestSessionExecCheckSetsid: a process that leaves its command's
// session after its parent has died is still that command's (its setsid
// was told to the host as it happened): what it starts is asked of the
// command's approver and audited under the command's run id, not decided
// with nobody to ask under the session's (how it was before the setsids
// were told: the ask was refused). Positive control: an allowed program
// it starts runs.
func TestSessionExecCheckSetsid(t *testing.T) {
	ws := sessionGit(t)
	var recs auditLog
	s := gitSession(t, ws, []string{"git", "push"}, nil, &recs)
	bg := "sleep 0.3; id -u >/dev/null; echo \"id -u: $?\"; id -g >/dev/null; echo \"id -g: $?\"\n"
	if err := os.WriteFile(filepath.Join(ws, "orphan.sh"), []byte(bg), 0o644); err != nil {
		t.Fatal(err)
	}
	// The subshell starts setsid and exits: setsid's sh is re-parented to
	// init in a session of its own.
	execAp := &syncApprover{yes: true}
	_, rep := gitExec(t, s, ws, "(setsid sh orphan.sh >/tmp/orphan.out 2>&1 &)", execAp)
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out, _ = gitExec(t, s, ws, "cat /tmp/orphan.out 2>/dev/null", nil); strings.Contains(out, "id -g:") {
			break
		}
	}
	if !strings.Contains(out, "id -u: 0\n") || !strings.Contains(out, "id -g: 0\n") {
		t.Errorf("orphan's output:\n%s", out)
	}
	asks := recs.find(rep.RunID, "ask-uid")
	if len(asks) != 1 || asks[0].Outcome != sandbox.ApprovalApproved {
		t.Errorf("the orphan's id -u is not approved under its command's run id %s: %+v", rep.RunID, recs.recs)
	}
	if n := len(recs.find(s.ID(), "ask-uid")); n != 0 {
		t.Errorf("the orphan's id -u is decided under the session's id too (%d records)", n)
	}
	execAp.mu.Lock()
	defer execAp.mu.Unlock()
	if len(execAp.asked) != 1 {
		t.Errorf("the command's approver was asked %q, want the orphan's id -u", execAp.asked)
	}
}

// TestSessionExecCheckManyCommands: a session forgets the commands that
// left no process behind (it would otherwise grow with every command),
// and not one whose background process lives on: after hundreds of
// commands, what that process starts is still attributed to its command.
func TestSessionExecCheckManyCommands(t *testing.T) {
	ws := sessionGit(t)
	var recs auditLog
	s := gitSession(t, ws, []string{"git", "push"}, nil, &recs)
	if err := os.WriteFile(filepath.Join(ws, "late.sh"), []byte("while [ ! -e go ]; do sleep 0.05; done; sh run.sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, rep := gitExec(t, s, ws, "sh late.sh >/tmp/late.out 2>&1 &", nil)
	for i := 0; i < 300; i++ {
		var out bytes.Buffer
		if _, err := s.Exec(context.Background(), &sandbox.ExecRequest{Args: []string{"true"}}, backend.Stdio{Stdout: &out, Stderr: &out}); err != nil {
			t.Fatal(err)
		}
	}
	gitExec(t, s, ws, "touch go", nil)
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out, _ = gitExec(t, s, ws, "cat /tmp/late.out 2>/dev/null", nil); strings.Contains(out, "git status:") {
			break
		}
	}
	if !strings.Contains(out, "git push: 126\n") {
		t.Errorf("late output:\n%s", out)
	}
	if n := len(recs.find(rep.RunID, "no-push")); n != 1 {
		t.Errorf("the late push is audited %d times under its command's run id", n)
	}
}

// TestSessionExecCheckLineApproved: in a session as in a Run, a command
// line a person approved is not asked about again as its programs start;
// that approval is the command's own: another command's script running
// the same program is asked (and refused) for itself.
func TestSessionExecCheckLineApproved(t *testing.T) {
	ws := sessionGit(t)
	var recs auditLog
	s := gitSession(t, ws, []string{"git", "push"}, nil, &recs)
	if err := os.WriteFile(filepath.Join(ws, "idu.sh"), []byte("id -u >/dev/null; echo \"b $?\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	yes, no := &syncApprover{yes: true}, &syncApprover{}
	if out, _ := gitExec(t, s, ws, `id -u >/dev/null; echo "a $?"`, yes); out != "a 0\n" {
		t.Errorf("approved line: %q", out)
	}
	if out, _ := gitExec(t, s, ws, "sh idu.sh", no); !strings.Contains(out, "b 126\n") {
		t.Errorf("another command's script: %q", out)
	}
	yes.mu.Lock()
	no.mu.Lock()
	defer yes.mu.Unlock()
	defer no.mu.Unlock()
	if len(yes.asked) != 1 || len(no.asked) != 1 {
		t.Errorf("asked: %q and %q, want once each", yes.asked, no.asked)
	}
}
