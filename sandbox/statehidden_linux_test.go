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

// TestReadOnlyPathHidesStateDir: a read-only path that holds moat's state
// directory (--ro ~/.local) shows the rest of its tree, but not the
// state directory: the trusted policies, other runs' change sets, the
// daemon's records and the workspaces it made for other sessions. A
// workspace the daemon made in it is still the command's.
func TestReadOnlyPathHidesStateDir(t *testing.T) {
	parent := t.TempDir()
	state := filepath.Join(parent, "state")
	t.Setenv("MOAT_STATE_DIR", state)
	write := func(path, data string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	trusted := write(filepath.Join(state, "trusted-policies.json"), "TRUSTED")
	changes := write(filepath.Join(state, "runs", "r1", "upper", "f"), "CHANGESET")
	record := write(filepath.Join(state, "daemon", "sessions", "s1.json"), "RECORD")
	otherWS := write(filepath.Join(state, "daemon", "workspaces", "s1", "f"), "OTHERS")
	beside := write(filepath.Join(parent, "beside.txt"), "BESIDE")
	ro := func(p *policy.Policy) { p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, parent) }
	probe := probeSh
	for _, f := range []string{trusted, changes, record, otherWS, beside} {
		probe += "try_read " + f + "\n"
	}

	t.Run("hidden", func(t *testing.T) {
		r := sh(t, t.TempDir(), ro, probe+"ls -A "+state+" | sed 's/^/LS /'; true")
		mustExit(t, r, 0)
		wantOutcome(t, r.stdout, "DENIED", trusted, changes, record, otherWS)
		// The control: the rest of the read-only tree reads.
		wantOutcome(t, r.stdout, "READ", beside)
		for _, name := range []string{"trusted-policies.json", "runs", "daemon"} {
			if strings.Contains(r.stdout, "LS "+name+"\n") {
				t.Errorf("the state directory lists %s:\n%s", name, r.stdout)
			}
		}
	})

	t.Run("copy workspace", func(t *testing.T) {
		// The copy's layer is in the state directory, bound at the
		// workspace: the mask over the state directory leaves it be.
		ws := t.TempDir()
		r := sh(t, ws, func(p *policy.Policy) {
			ro(p)
			p.Workspace.Mode = policy.WorkspaceCopy
		}, probe+"try_write "+filepath.Join(ws, "new.txt")+"\n")
		mustExit(t, r, 0)
		wantOutcome(t, r.stdout, "DENIED", trusted, changes, record, otherWS)
		wantOutcome(t, r.stdout, "READ", beside)
		wantOutcome(t, r.stdout, "WROTE", filepath.Join(ws, "new.txt"))
	})

	t.Run("workspace in it", func(t *testing.T) {
		// A daemon's temporary workspace, which only moat makes there
		// (Caller.StateWorkspace; any other is refused).
		ws := filepath.Join(state, "daemon", "workspaces", "s2")
		mine := write(filepath.Join(ws, "mine.txt"), "MINE")
		p := policy.Default()
		p.Workspace.Path = ws
		ro(p)
		if err := p.Resolve(ws, ""); err != nil {
			t.Fatal(err)
		}
		c := sandbox.CurrentCaller()
		c.StateWorkspace = true
		var out, errb bytes.Buffer
		rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Caller: &c,
			Args: []string{"/bin/sh", "-c", probe + "try_read " + mine + "\ntry_write " + filepath.Join(ws, "new.txt") + "\n"}},
			backend.Stdio{Stdout: &out, Stderr: &errb})
		r := result{rep, err, out.String(), errb.String()}
		mustExit(t, r, 0)
		wantOutcome(t, r.stdout, "DENIED", trusted, changes, record, otherWS)
		wantOutcome(t, r.stdout, "READ", beside, mine)
		wantOutcome(t, r.stdout, "WROTE", filepath.Join(ws, "new.txt"))
	})

	t.Run("control", func(t *testing.T) {
		// A path in the state directory the policy names itself is
		// shown: the probe reads a change set where the sandbox has one,
		// so "DENIED" above is the mask, not a probe that cannot read.
		r := sh(t, t.TempDir(), func(p *policy.Policy) {
			p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, filepath.Join(state, "runs"))
		}, probe)
		mustExit(t, r, 0)
		wantOutcome(t, r.stdout, "READ", changes)
	})
}
