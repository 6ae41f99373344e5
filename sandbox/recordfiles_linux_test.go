package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// A record file (--audit, --report) kept where the command can write is
// warned of in the report, since the command could rewrite it, a stream's
// whole chain included, and it would still verify. The controls: the same file outside the workspace, and in
// the workspace of an overlay run, whose writes stay in its change set,
// draw no warning.
func TestRecordFileTheCommandCanWrite(t *testing.T) {
	ws := t.TempDir()
	outside := filepath.Join(t.TempDir(), "audit.jsonl")
	inside := filepath.Join(ws, "audit.jsonl")
	warned := func(mode string, files ...string) []string {
		t.Helper()
		p := workspacePolicy(t, ws)
		if mode != "" {
			p.Workspace.Mode = mode
		}
		var out, errb bytes.Buffer
		rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"true"}, RecordFiles: files},
			backend.Stdio{Stdout: &out, Stderr: &errb})
		if err != nil || rep.ExitCode != 0 {
			t.Fatalf("run: %v (%s)", err, errb.String())
		}
		var got []string
		for _, w := range rep.Warnings {
			if strings.Contains(w, "record is kept") {
				got = append(got, w)
			}
		}
		return got
	}
	if w := warned("", inside, outside); len(w) != 1 || !strings.Contains(w[0], inside) {
		t.Errorf("the workspace's record file and another: warnings %q", w)
	}
	// By a relative name, from the workspace, as moat run --audit takes it.
	wd, _ := os.Getwd()
	if err := os.Chdir(ws); err != nil {
		t.Fatal(err)
	}
	w := warned("", "audit.jsonl")
	os.Chdir(wd)
	if len(w) != 1 {
		t.Errorf("a relative name in the workspace: warnings %q", w)
	}
	if w := warned("", outside); len(w) != 0 {
		t.Errorf("a record file outside the workspace: %q", w)
	}
	if w := warned(policy.WorkspaceOverlay, inside); len(w) != 0 {
		t.Errorf("an overlay workspace: %q", w)
	}
}
