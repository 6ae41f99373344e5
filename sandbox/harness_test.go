//go:build linux

package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/sandbox"
)

// fakeApprover answers every ask with yes, and remembers what it was shown.
type fakeApprover struct {
	yes   bool
	asked []harness.Decision
}

func (f *fakeApprover) Name() string { return "test" }

func (f *fakeApprover) Approve(_ context.Context, _ harness.Action, d harness.Decision) (bool, error) {
	f.asked = append(f.asked, d)
	return f.yes, nil
}

// TestRunAsksApprover: the rules hold for a library caller, since the check
// is in sandbox.Run: an ask goes to the Request's Approver, and a refusal
// runs nothing.
func TestRunAsksApprover(t *testing.T) {
	for _, tt := range []struct {
		name     string
		approver *fakeApprover
		ran      bool
		approval string
	}{
		{"no approver", nil, false, sandbox.ApprovalNoApprover},
		{"refused", &fakeApprover{}, false, sandbox.ApprovalDenied},
		{"approved", &fakeApprover{yes: true}, true, sandbox.ApprovalApproved},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			p := workspacePolicy(t, ws)
			var mu sync.Mutex
			var recs []audit.Decision // of the command line; its programs' are TestExecCheck's
			caller := sandbox.CurrentCaller()
			caller.Cwd = ws
			req := &sandbox.Request{Backend: testBackend(), Policy: p, Caller: &caller,
				AuditDecision: func(d audit.Decision) error {
					mu.Lock()
					defer mu.Unlock()
					if d.At == "" {
						recs = append(recs, d)
					}
					return nil
				}}
			req.Args = []string{"sh", "-c", "touch marker && git push 2>/dev/null; true"}
			if tt.approver != nil {
				req.Approver = tt.approver
			}
			rep, err := sandbox.Run(context.Background(), req, backend.Stdio{})
			_, statErr := os.Stat(filepath.Join(ws, "marker"))
			if ran := statErr == nil; ran != tt.ran {
				t.Errorf("marker made: %v, want %v (err %v)", ran, tt.ran, err)
			}
			if rep.Approval != tt.approval || rep.Decision == nil || rep.Decision.Rule.String() != "irreversible/git-push" {
				t.Errorf("report: approval %q, decision %+v", rep.Approval, rep.Decision)
			}
			if !tt.ran && (!errors.Is(err, sandbox.ErrDenied) || rep.Reason != "denied" || rep.ExitCode != 125) {
				t.Errorf("refused run: %v, reason %q, exit %d", err, rep.Reason, rep.ExitCode)
			}
			if len(recs) != 1 || recs[0].Outcome != tt.approval || recs[0].Dir != ws || !strings.Contains(recs[0].Rule, "git-push") {
				t.Errorf("audit records %+v", recs)
			}
			if tt.approver != nil && len(tt.approver.asked) != 1 {
				t.Errorf("the approver was asked %d times", len(tt.approver.asked))
			}
		})
	}
}
