//go:build linux

package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/sandbox"
)

// waitingApprover is asked, and waits for its ctx to end.
type waitingApprover struct {
	asked chan struct{}
	ended chan struct{}
}

func (a *waitingApprover) Name() string { return "test" }

func (a *waitingApprover) Approve(ctx context.Context, _ harness.Action, _ harness.Decision) (bool, error) {
	close(a.asked)
	<-ctx.Done()
	close(a.ended)
	return false, ctx.Err()
}

// TestAskEndsWithItsCaller: a program's ask that waits for a person ends
// when the program is killed meanwhile (its command's client went away):
// it stayed pending for minutes, and a person could still grant it
// (found by a tester). The control: while the program lives, the ask
// waits.
func TestAskEndsWithItsCaller(t *testing.T) {
	ws := sessionGit(t)
	if err := os.WriteFile(filepath.Join(ws, "ask.sh"), []byte("id -u\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ap := &waitingApprover{asked: make(chan struct{}), ended: make(chan struct{})}
	s := gitSession(t, ws, []string{"git", "push"}, ap, &auditLog{})
	p, err := s.Start(context.Background(), &sandbox.ExecRequest{Args: []string{"/bin/sh", "ask.sh"}}, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ap.asked:
	case <-time.After(30 * time.Second):
		t.Fatal("control: id -u was not asked about")
	}
	select {
	case <-ap.ended:
		t.Fatal("control: the ask ended while its program lived")
	case <-time.After(500 * time.Millisecond):
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ap.ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the ask outlived its program")
	}
	p.Wait()
}
