package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestEarlyCancelStopsSavingRun: a run whose init saves its changes (an
// overlay workspace under a disk limit) is cancelled at moments from
// before its command starts to just after: the command never runs to its
// end. Before, a stop that reached init before the command existed
// killed nothing, and the command ran its whole course while the report
// said killed and the exit status 0 (tried: about half the tries at
// these moments). The control: uncancelled, the same command ends on its
// own and its file is in the change set.
func TestEarlyCancelStopsSavingRun(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	p := policy.Default()
	p.Workspace.Path = ws
	p.Workspace.Mode = policy.WorkspaceOverlay
	p.Limits.Disk = policy.Size(32 << 20)
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	script := []string{"sh", "-c", "sleep 2; echo ran > marker"}
	run := func(ctx context.Context) (*sandbox.Report, error) {
		var out bytes.Buffer
		return sandbox.Run(ctx, &sandbox.Request{Backend: testBackend(), Policy: p, Args: script}, backend.Stdio{Stdout: &out, Stderr: &out})
	}
	for _, delay := range []time.Duration{0, 2, 5, 10, 15, 20, 30, 40} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(delay*time.Millisecond, cancel)
		start := time.Now()
		rep, _ := run(ctx)
		cancel()
		if took := time.Since(start); took > 1500*time.Millisecond || rep.ExitCode == 0 {
			t.Errorf("cancelled after %v: exit %d (%s) after %v, want it killed at once", delay*time.Millisecond, rep.ExitCode, rep.Reason, took)
		}
	}
	rep, err := run(context.Background())
	if err != nil || rep.ExitCode != 0 || rep.ChangeSet == nil {
		t.Fatalf("control: %v %+v", err, rep)
	}
}

// TestCopyRunWroteNothing: a copy-mode run whose command changed nothing
// removes its change set (a whole copy of the workspace), as an overlay
// run does; before, it was kept, tried. The control: one that writes
// keeps it.
func TestCopyRunWroteNothing(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	os.WriteFile(ws+"/f", []byte("a\n"), 0o644)
	copyMode := func(p *policy.Policy) { p.Workspace.Mode = policy.WorkspaceCopy }
	r := sh(t, ws, copyMode, "cat f >/dev/null")
	mustExit(t, r, 0)
	if r.rep.ChangeSet != nil {
		t.Errorf("a copy run that wrote nothing kept change set %+v", r.rep.ChangeSet)
	}
	r = sh(t, ws, copyMode, "echo b > g")
	mustExit(t, r, 0)
	if r.rep.ChangeSet == nil {
		t.Error("a copy run that wrote a file kept no change set")
	}
}
