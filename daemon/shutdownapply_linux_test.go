//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/workspace"
)

// TestShutdownFinishesApply: a graceful shutdown (any drain bound; here
// the one of --drain 0, over at the call) that comes while an apply
// writes a tenant's workspace lets it finish before Shutdown returns,
// that is before the daemon's stop is written and its state lock let
// go: the workspace holds every change, no temporary entry of the
// apply's, and the apply's caller gets its report. Before, Shutdown
// ended the sessions and returned with the apply still under way, and
// moat serve's process ended in the middle of it (the red team's
// workspace was left with 1336 of 2000 files rewritten). A review asked
// for while the daemon drains is refused (draining); the control: the
// same apply with no shutdown lands whole.
func TestShutdownFinishesApply(t *testing.T) {
	const n = 300
	tenant := UIDTenant(os.Geteuid())
	ctx := context.Background()
	// session makes an overlay session over a fresh workspace of n
	// files, rewrites them all and makes d/ with n more.
	session := func(m *Manager) (*Session, string) {
		ws := filepath.Join(t.TempDir(), "ws")
		os.Mkdir(ws, 0o755)
		for i := range n {
			os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%d", i)), []byte(fmt.Sprintf("orig%d\n", i)), 0o644)
		}
		s, err := m.Create(ctx, tenant, &CreateRequest{Workspace: ws, WorkspaceMode: "overlay"})
		if err != nil && strings.Contains(err.Error(), "overlay") {
			t.Skipf("overlayfs cannot be mounted here: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo new$i > f$i; i=$((i+1)); done; mkdir d; i=0; while [ $i -lt %d ]; do echo x > d/n$i; i=$((i+1)); done`, n, n)
		rep, err := s.Exec(ctx, &ExecRequest{Args: []string{"sh", "-c", script}}, backend.Stdio{})
		if err != nil || rep.ExitCode != 0 {
			t.Fatalf("the session's writes: %+v %v", rep, err)
		}
		return s, ws
	}
	// applied says what is wrong with ws, "" when every change is in it.
	applied := func(ws string) string {
		var bad []string
		for i := range n {
			if b, _ := os.ReadFile(filepath.Join(ws, fmt.Sprintf("f%d", i))); string(b) != fmt.Sprintf("new%d\n", i) {
				bad = append(bad, fmt.Sprintf("f%d is %q", i, b))
			}
		}
		if ents, err := os.ReadDir(filepath.Join(ws, "d")); len(ents) != n {
			bad = append(bad, fmt.Sprintf("d/ holds %d entries (%v)", len(ents), err))
		}
		left, _ := filepath.Glob(filepath.Join(ws, ".moat-*"))
		if len(left) > 0 {
			bad = append(bad, fmt.Sprintf("left: %q", left))
		}
		if len(bad) > 3 {
			bad = append(bad[:3], fmt.Sprintf("and %d more", len(bad)-3))
		}
		return strings.Join(bad, "; ")
	}

	// The control: no shutdown.
	m := newManager(t, Config{Engine: Sandboxes})
	s, ws := session(m)
	if rep, err := m.Apply(ctx, tenant, s.ID, nil, nil, false); err != nil || len(rep.Applied) != 2*n+1 {
		t.Fatalf("control: the apply: %d applied, %v", len(rep.Applied), err)
	}
	if bad := applied(ws); bad != "" {
		t.Fatalf("control: the apply: %s", bad)
	}

	m = newManager(t, Config{Engine: Sandboxes})
	s, ws = session(m)
	cs := s.ChangeSet()
	applying, release := make(chan struct{}), make(chan struct{})
	testHookApply = func() {
		close(applying)
		<-release
	}
	defer func() { testHookApply = nil }()
	type result struct {
		rep workspace.Report
		err error
	}
	res := make(chan result, 1)
	go func() {
		rep, err := m.Apply(ctx, tenant, s.ID, nil, nil, false)
		res <- result{rep, err}
	}()
	select {
	case <-applying:
	case r := <-res:
		t.Fatalf("the apply ended before it wrote: %v", r.err)
	}
	over, cancel := context.WithCancel(ctx)
	cancel() // --drain 0
	stopped := make(chan error, 1)
	go func() { stopped <- m.Shutdown(over) }()
	for {
		m.mu.Lock()
		draining := m.draining
		m.mu.Unlock()
		if draining {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := m.Apply(ctx, tenant, s.ID, nil, nil, false); !errors.Is(err, ErrDraining) {
		t.Errorf("an apply asked for while the daemon drains: %v, want ErrDraining", err)
	}
	if err := m.Discard(ctx, tenant, s.ID); !errors.Is(err, ErrDraining) {
		t.Errorf("a discard asked for while the daemon drains: %v, want ErrDraining", err)
	}
	returned := false
	select {
	case err := <-stopped:
		t.Errorf("Shutdown returned (%v) while an apply was under way", err)
		returned = true
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	if !returned {
		select {
		case <-stopped:
		case <-time.After(time.Minute):
			t.Fatal("Shutdown did not return once the apply could go on")
		}
	}
	// Everything is settled when Shutdown returns.
	select {
	case r := <-res:
		if r.err != nil || len(r.rep.Applied) != 2*n+1 {
			t.Errorf("the apply's caller got: %d applied, %v", len(r.rep.Applied), r.err)
		}
	default:
		t.Error("Shutdown returned before the apply ended")
	}
	if bad := applied(ws); bad != "" {
		t.Errorf("the workspace when Shutdown returned: %s", bad)
	}
	if _, err := workspace.Open(cs); !errors.Is(err, workspace.ErrNotFound) {
		t.Errorf("the change set applied in full is kept: %v", err)
	}
	if l, err := lockState(m.cfg.StateDir, 0); err != nil {
		t.Errorf("the state lock after Shutdown: %v", err)
	} else {
		l.Close()
	}
}
