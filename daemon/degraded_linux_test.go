//go:build linux

package daemon

import (
	"context"
	"os"
	"testing"
)

// TestAllowDegradedReachesTheEngine: the daemon's AllowDegraded (moat
// serve --allow-degraded, moat mcp's) is what each session's sandbox is
// made with; without it, none is (the control).
// sandbox's TestCopyUnderDiskRefusedBeforeCopy shows what a degraded
// session's commands report.
func TestAllowDegradedReachesTheEngine(t *testing.T) {
	for _, allow := range []bool{false, true} {
		var got []bool
		eng := func(ctx context.Context, spec *EngineSpec) (Engine, error) {
			got = append(got, spec.AllowDegraded)
			return newFake(ctx, spec)
		}
		m := newManager(t, Config{Engine: eng, AllowDegraded: allow})
		if _, err := m.Create(context.Background(), UIDTenant(os.Geteuid()), &CreateRequest{Workspace: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != allow {
			t.Errorf("AllowDegraded %v: the engine was made with %v", allow, got)
		}
	}
}
