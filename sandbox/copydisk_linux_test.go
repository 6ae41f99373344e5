package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// TestCopyUnderDiskRefusedBeforeCopy: a copy workspace under a disk limit
// is refused before the workspace is copied, by a run and by a session
// alike, with the refusal that names the limit, the workspace and the way
// out (overlay, --allow-degraded), rather than after a copy made for
// nothing (here, a workspace larger than the limit would be cut off as
// too large to copy). Controls: the same workspace in copy mode runs
// without the limit, and with degradation allowed.
func TestCopyUnderDiskRefusedBeforeCopy(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "big"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	copyUnder := func(disk int64) func(*policy.Policy) {
		return func(p *policy.Policy) {
			p.Workspace.Mode = policy.WorkspaceCopy
			p.Limits.Disk = policy.Size(disk)
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, sandbox.ErrRefused) || errors.Is(err, workspace.ErrCopyTooLarge) {
			t.Errorf("%s: %v, want a refusal before the copy", what, err)
			return
		}
		for _, want := range []string{"--disk", ws, "overlay", "--allow-degraded"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the refusal does not say %q: %v", what, want, err)
			}
		}
	}

	r := sh(t, ws, copyUnder(2<<20), "echo RAN")
	refused("a run", r.err)
	if strings.Contains(r.stdout, "RAN") {
		t.Error("the refused run ran")
	}
	p := policy.Default()
	p.Workspace.Path = ws
	copyUnder(2 << 20)(p)
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: p, Backend: testBackend()})
	if err == nil {
		s.Close(context.Background())
	}
	refused("a session", err)
	if cs, err := os.ReadDir(filepath.Join(state, "runs")); len(cs) != 0 {
		t.Errorf("change sets left: %v %v", cs, err)
	}

	// Positive controls: the same copy is made and seen.
	r = sh(t, ws, copyUnder(0), "test -s big && echo RAN")
	if r.err != nil || !strings.Contains(r.stdout, "RAN") {
		t.Fatalf("copy mode without a disk limit: %v %q %q", r.err, r.stdout, r.stderr)
	}
	r = runDegraded(t, ws, copyUnder(8<<20), "test -s big && echo RAN")
	if r.err != nil || !strings.Contains(r.stdout, "RAN") || len(r.rep.Degraded) != 1 {
		t.Fatalf("copy mode under 8MiB, degraded: %v %q %q %q", r.err, r.stdout, r.stderr, r.rep.Degraded)
	}
	// A session with degradation allowed runs too, and each command's
	// warnings say what it runs without (a client sees those, not the
	// session's making).
	copyUnder(8 << 20)(p)
	s, err = sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: p, Backend: testBackend(), AllowDegraded: true})
	if err != nil {
		t.Fatalf("a session, degraded: %v", err)
	}
	defer s.Close(context.Background())
	_, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, "test -s big")
	if err != nil || rep.ExitCode != 0 || !strings.Contains(strings.Join(rep.Warnings, "\n"), "running degraded: disk limit") {
		t.Errorf("a degraded session's command: %v %+v, want its warnings to name the disk limit", err, rep)
	}
}
