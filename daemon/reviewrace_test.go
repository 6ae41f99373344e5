package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moatbox/moat/sandbox"
)

// slowEnding is a fake overlay session's sandbox: it has a change set,
// and its Close waits for release, as a real one's waits while it saves
// the changes its tmpfs held.
type slowEnding struct {
	*fakeEngine
	release chan struct{}
}

func (s *slowEnding) ChangeSet() string { return "0123456789ab" }

func (s *slowEnding) Close(ctx context.Context) (*sandbox.Report, error) {
	<-s.release
	return s.fakeEngine.Close(ctx)
}

// TestDiskHeldWhileReviewEnds: a session that a review ends keeps its
// disk counted while its sandbox closes, until its change set is counted
// as kept for review (review.disk): a create in that moment must not take
// the disk that the change set is about to hold. Control: once the review
// holds it (nothing, here: the fake change set has no files), the same
// create fits.
func TestDiskHeldWhileReviewEnds(t *testing.T) {
	release := make(chan struct{})
	engine := func(ctx context.Context, spec *EngineSpec) (Engine, error) {
		f, _ := newFake(ctx, spec)
		if spec.Policy.Workspace.Mode == "overlay" {
			return &slowEnding{fakeEngine: f.(*fakeEngine), release: release}, nil
		}
		return f, nil
	}
	m := newManager(t, Config{Engine: engine, TenantDisk: 12 << 20})
	ctx := context.Background()
	a := TokenTenant("a")
	pol := "[limits]\ndisk = \"8MiB\"\n"
	s, err := m.Create(ctx, a, &CreateRequest{Policy: pol, WorkspaceMode: "overlay"})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- m.Discard(ctx, a, s.ID) }()
	// Wait until the review has taken the session off the live ones.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := m.Get(a, s.ID); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the review did not end the session")
		}
	}
	if o, err := m.Create(ctx, a, &CreateRequest{Policy: pol, WorkspaceMode: "readonly"}); !errors.Is(err, ErrQuota) {
		t.Errorf("a create while the reviewed session ends: %v, want the disk quota", err)
		if err == nil {
			m.Delete(ctx, a, o.ID)
		}
	}
	close(release)
	<-ended
	if _, err := m.Create(ctx, a, &CreateRequest{Policy: pol, WorkspaceMode: "readonly"}); err != nil {
		t.Errorf("positive control: the create once the review holds nothing: %v", err)
	}
}
