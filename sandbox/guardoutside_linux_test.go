package sandbox_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGuardMovesNothingOutside: after a direct-mode run, the guard moves
// what the run planted where git reads its nested git directories into
// the quarantine, on the host. A command that puts a link there to
// another repository of the host must not make it move that
// repository's config and hooks (as root in the daemon, any file named
// so): the link is quarantined instead. The control: a worktree git
// directory the command makes for real is quarantined.
func TestGuardMovesNothingOutside(t *testing.T) {
	for _, tc := range []struct {
		name, attack, quarantined string
	}{
		{"control", `mkdir -p .git/worktrees/w && cp .git/HEAD .git/worktrees/w/HEAD && echo '[core]' > .git/worktrees/w/config`, ".git/worktrees/w/config"},
		{"worktrees link", `ln -s "$VICTIM" .git/worktrees`, ".git/worktrees"},
		{"modules link", `ln -s "$VICTIM" .git/modules`, ".git/modules"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MOAT_STATE_DIR", t.TempDir())
			ws := newRepo(t)
			victim := newRepo(t)
			os.Chmod(filepath.Dir(victim), 0o755)
			r := sh(t, ws, nil, `VICTIM=`+victim+`; `+tc.attack+` && echo PLANTED`)
			mustExit(t, r, 0)
			if !strings.Contains(r.stdout, "PLANTED") {
				t.Fatalf("the command could not plant, so the test cannot tell: %s%s", r.stdout, r.stderr)
			}
			for _, e := range []string{"config", "hooks", "HEAD"} {
				if _, err := os.Lstat(filepath.Join(victim, ".git", e)); err != nil {
					t.Errorf("the repository outside the workspace lost .git/%s: %v", e, err)
				}
			}
			if !slices.Contains(r.rep.ProtectedCreated, tc.quarantined) {
				t.Errorf("protected_created %q, want %s", r.rep.ProtectedCreated, tc.quarantined)
			}
		})
	}
}
