//go:build linux

package httpapi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// TestRulesHoldInsideScripts: through the daemon, the rules decide what a
// script run in a session starts, not only the command line sent: a
// script (written through the files API) that runs `git push` is refused
// it by a deny rule (EACCES: the shell says 126), and the exec's report
// names the rule; with the rule about another command (the positive
// control), the same script pushes.
func TestRulesHoldInsideScripts(t *testing.T) {
	var mu sync.Mutex
	var recs []audit.Decision
	d := startDaemon(t, daemon.Config{Audit: decisionSink(func(r audit.Decision) { mu.Lock(); recs = append(recs, r); mu.Unlock() })}, nil)
	ctx := context.Background()
	for _, tt := range []struct {
		name, deny, want string
	}{
		{"denied", "push", "git push: 126"},
		{"control", "fetch", "ran git push\ngit push: 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pol := "[harness]\nbuiltin = []\n\n[[rules]]\nname = \"no-push\"\nmatch = { command = [\"git\", \"" + tt.deny + "\"] }\ndecision = \"deny\"\nreason = \"pushes stay inside\"\n"
			ws := t.TempDir()
			if err := os.Mkdir(filepath.Join(ws, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			s := d.create(t, &client.CreateSessionRequest{Policy: pol, Workspace: ws})
			if err := d.c.WriteFile(ctx, s.ID, "bin/git", []byte("#!/bin/sh\necho \"ran git $*\"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			script := "PATH=$PWD/bin:$PATH\ngit push; echo \"git push: $?\"\ngit status >/dev/null; echo \"git status: $?\"\n"
			if err := d.c.WriteFile(ctx, s.ID, "run.sh", []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			out, errb, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "run.sh"}})
			if !strings.Contains(out, tt.want+"\n") || !strings.Contains(out, "git status: 0\n") || rep.ExitCode != 0 {
				t.Errorf("exit %d, output lacks %q:\n%s%s", rep.ExitCode, tt.want, out, errb)
			}
			var refused int
			for _, dn := range rep.Denials {
				if dn.Layer == "rules" && strings.HasPrefix(dn.What, "git push") && strings.Contains(dn.Rule, "no-push") {
					refused += dn.Count
				}
			}
			want := map[string]int{"denied": 1, "control": 0}[tt.name]
			if refused != want {
				t.Errorf("%d refusals of git push in the report, want %d: %+v", refused, want, rep.Denials)
			}
			mu.Lock()
			audited := 0
			for _, r := range recs {
				if r.At == "exec" && strings.Contains(r.Rule, "no-push") && len(r.Command) > 1 && r.Command[1] == "push" {
					audited++
				}
			}
			recs = nil
			mu.Unlock()
			if audited != want {
				t.Errorf("%d refusals of git push audited, want %d", audited, want)
			}
		})
	}
}
