package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
)

// TestUnrecordedActionRefused: an action a rule decided and a person
// approved runs only once its decision's record is written: when the
// audit stream fails (AuditDecision's error), the approved command line,
// and an approved program a script starts, are refused, saying why. The
// control: the same runs with the record written go through.
func TestUnrecordedActionRefused(t *testing.T) {
	full := errors.New("write audit stream: no space left on device")
	t.Run("line", func(t *testing.T) {
		for _, fail := range []bool{false, true} {
			ws := t.TempDir()
			caller := sandbox.CurrentCaller()
			caller.Cwd = ws
			var recs []audit.Decision
			req := &sandbox.Request{Backend: testBackend(), Policy: workspacePolicy(t, ws), Caller: &caller,
				Approver: &fakeApprover{yes: true},
				Args:     []string{"sh", "-c", "touch marker && git push 2>/dev/null; true"},
				AuditDecision: func(d audit.Decision) error {
					if d.At == "" {
						recs = append(recs, d)
					}
					if fail {
						return full
					}
					return nil
				}}
			rep, err := sandbox.Run(context.Background(), req, backend.Stdio{})
			_, statErr := os.Stat(filepath.Join(ws, "marker"))
			if ran := statErr == nil; ran == fail {
				t.Errorf("audit failing %v: the approved line ran: %v (err %v)", fail, ran, err)
			}
			if len(recs) != 1 || recs[0].Outcome != sandbox.ApprovalApproved {
				t.Errorf("audit failing %v: records %+v", fail, recs)
			}
			if !fail {
				continue
			}
			if !errors.Is(err, sandbox.ErrDenied) || rep.Reason != "denied" || rep.ExitCode != 125 ||
				!strings.Contains(err.Error(), "could not be written to the audit stream (write audit stream: no space left on device)") {
				t.Errorf("refused run: %v, reason %q, exit %d", err, rep.Reason, rep.ExitCode)
			}
		}
	})
	t.Run("exec", func(t *testing.T) {
		for _, fail := range []bool{false, true} {
			ws := t.TempDir()
			caller := sandbox.CurrentCaller()
			caller.Cwd = ws
			// The line names no rule's command: xargs starts `id -u`,
			// which the exec check asks about.
			req := &sandbox.Request{Backend: testBackend(), Policy: execPolicy(t, ws, execRules), Caller: &caller,
				Approver: &syncApprover{yes: true},
				Args:     []string{"sh", "-c", `echo -u | xargs id >/dev/null; echo "id -u: $?"`},
				AuditDecision: func(d audit.Decision) error {
					if fail && d.At == "exec" {
						return full
					}
					return nil
				}}
			var out, errb bytes.Buffer
			rep, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &errb})
			if err != nil {
				t.Fatalf("run: %v\n%s", err, errb.String())
			}
			want := "id -u: 0"
			if fail {
				want = "id -u: 12" // xargs: 126 or 127, the program could not be run
			}
			if !strings.Contains(out.String(), want) {
				t.Errorf("audit failing %v: output %q, want %q; stderr %s", fail, out.String(), want, errb.String())
			}
			var denied string
			for _, d := range rep.Denials {
				denied += d.What + " " + d.Rule + "\n"
			}
			if refused := strings.Contains(denied, "could not be written to the audit stream"); refused != fail {
				t.Errorf("audit failing %v: denials %q", fail, denied)
			}
		}
	})
	// A program a script starts that a rule allows is recorded as the
	// same line's would be, and refused when its record cannot be written
	// (found by a tester: a push a rule allowed left no record). The
	// control: a program no rule names is neither.
	t.Run("exec allowed by a rule", func(t *testing.T) {
		rules := `
[[rules]]
name = "allow-uid"
match = { command = ["id", "-u"] }
decision = "allow"
`
		for _, fail := range []bool{false, true} {
			ws := t.TempDir()
			caller := sandbox.CurrentCaller()
			caller.Cwd = ws
			var mu sync.Mutex
			var recs []audit.Decision
			req := &sandbox.Request{Backend: testBackend(), Policy: execPolicy(t, ws, rules), Caller: &caller,
				Args: []string{"sh", "-c", `echo -u | xargs id >/dev/null; echo "id -u: $?"; echo -g | xargs id >/dev/null; echo "id -g: $?"`},
				AuditDecision: func(d audit.Decision) error {
					mu.Lock()
					defer mu.Unlock()
					if d.At == "exec" {
						recs = append(recs, d)
						if fail {
							return full
						}
					}
					return nil
				}}
			var out, errb bytes.Buffer
			if _, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &errb}); err != nil {
				t.Fatalf("run: %v\n%s", err, errb.String())
			}
			want := "id -u: 0"
			if fail {
				want = "id -u: 12"
			}
			if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "id -g: 0") {
				t.Errorf("audit failing %v: output %q, want %q and id -g: 0; stderr %s", fail, out.String(), want, errb.String())
			}
			mu.Lock()
			if len(recs) != 1 || recs[0].Verdict != "allow" || !strings.Contains(recs[0].Rule, "allow-uid") || !slices.Equal(recs[0].Command, []string{"id", "-u"}) {
				t.Errorf("audit failing %v: exec records %+v, want one allow of id -u by allow-uid", fail, recs)
			}
			mu.Unlock()
		}
	})
}
