package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/policy"
)

// TestFirstExecSwappedAfterTheDecision: the command line's program lies
// in the workspace, where another run of the same workspace, or a tool of
// the agent's on the host, can swap it between the host's decision and
// the command's exec. Its exec is then decided again by its file: ./tool,
// decided as a copy of true, swapped for a link to id (which a rule
// denies) as the decision was made, is refused (found by a tester: a
// concurrent run flipped ./tool to a link to git, and git push ran, the
// audit showing only ./tool). The controls: left alone, ./tool runs; and
// swapped without the rule, id runs, so the swap is what the check saw.
func TestFirstExecSwappedAfterTheDecision(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	truth, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	var b backend.Backend
	if os.Getenv("MOAT_TEST_FORK_START") == "1" {
		b = &native.Backend{ForkStart: true}
	}
	for _, tc := range []struct {
		name       string
		deny, swap bool
	}{{"swapped", true, true}, {"control: left alone", true, false}, {"control: no rule", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			// Searchable by all, as a workspace usually is (a mode 0700
			// directory on the way is one the check re-decides anyway).
			for _, d := range []string{ws, filepath.Dir(ws)} {
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			tool := filepath.Join(ws, "tool")
			if err := os.WriteFile(tool, truth, 0o755); err != nil {
				t.Fatal(err)
			}
			p := policy.Default()
			p.Workspace.Path = ws
			if tc.deny {
				p.Rules = append(p.Rules, policy.Rule{Name: "no-id", Match: policy.Match{Command: []string{"id"}}, Decision: "deny"})
			}
			home, _ := os.UserHomeDir()
			if err := p.Resolve(ws, home); err != nil {
				t.Fatal(err)
			}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			if tc.swap {
				testHookLineDecided = func() {
					os.Remove(tool)
					if err := os.Symlink("/usr/bin/id", tool); err != nil {
						t.Error(err)
					}
				}
				defer func() { testHookLineDecided = nil }()
			}
			var out, errb bytes.Buffer
			rep, err := Run(context.Background(), &Request{Backend: b, Policy: p, Args: []string{"./tool"}},
				backend.Stdio{Stdout: &out, Stderr: &errb})
			if rep == nil {
				t.Fatalf("no report: %v", err)
			}
			ran := strings.Contains(out.String(), "uid=")
			switch {
			case tc.deny && tc.swap:
				if ran || rep.ExitCode == 0 {
					t.Errorf("the swapped ./tool ran id: exit %d, %q %q", rep.ExitCode, out.String(), errb.String())
				}
			case !tc.swap:
				if rep.ExitCode != 0 || ran {
					t.Errorf("control: ./tool: exit %d, %q %q %v", rep.ExitCode, out.String(), errb.String(), err)
				}
			default:
				if !ran {
					t.Errorf("control: the swapped ./tool did not run id: exit %d, %q %q %v", rep.ExitCode, out.String(), errb.String(), err)
				}
			}
		})
	}
}
