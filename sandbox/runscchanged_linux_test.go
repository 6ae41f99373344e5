//go:build linux

package sandbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestGVisorRunscChangedAfterTrust: a trusted policy's sandbox.runsc that
// changes after the trust was checked (Trust.Load) is not started: a run
// is refused, and so is a session's next command, and the session ends
// without it (its process group killed instead). runsc here is a script
// that notes each start and then runs the real runsc. The control: the
// same runsc unchanged runs a command, and a session's commands, through
// the copy of the bytes the trust check hashed (gvisor.Backend.Checked),
// not the file itself.
func TestGVisorRunscChangedAfterTrust(t *testing.T) {
	gvisorUsable(t)
	real, err := gvisor.Find("")
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir() // where the checked copy goes
	t.Setenv("MOAT_STATE_DIR", state)
	dir := t.TempDir()
	runsc := filepath.Join(dir, "runsc")
	marker := filepath.Join(dir, "started")
	wrapper := fmt.Sprintf("#!/bin/sh\necho started >> %s\nexec %s \"$@\"\n", marker, real)
	doc := fmt.Sprintf("[sandbox]\nisolation = \"gvisor\"\nrunsc = %q\n\n[harness]\nbuiltin = []\n", runsc)
	path, trust, home := trustFiles(t, dir, map[string]string{".moat.toml": doc, "runsc": wrapper})
	load := func() *policy.Policy {
		t.Helper()
		p, err := trust.Load(path, home)
		if err != nil {
			t.Fatal(err)
		}
		ws := t.TempDir()
		os.Chown(ws, 1000, 1000)
		p.Workspace.Path = ws
		if err := p.ResolveAndValidate(ws, home); err != nil {
			t.Fatal(err)
		}
		return p
	}
	started := func() int {
		b, _ := os.ReadFile(marker)
		return strings.Count(string(b), "started\n")
	}
	run := func(p *policy.Policy) (*sandbox.Report, error) {
		return sandbox.Run(context.Background(), &sandbox.Request{Policy: p, Args: []string{"/bin/true"}}, backend.Stdio{})
	}
	changed := func(err error) bool {
		var ue *policy.UntrustedError
		return errors.As(err, &ue) && ue.File == runsc && ue.Field == "sandbox.runsc" && ue.Reason == policy.TrustChanged
	}

	// The control: unchanged, the run goes through this runsc, as the
	// copy of what the trust check hashed.
	if rep, err := run(load()); err != nil || rep.ExitCode != 0 || rep.Backend != "gvisor" || started() == 0 {
		t.Fatalf("control: %v (report %+v), runsc started %d times", err, rep, started())
	}
	sum := sha256.Sum256([]byte(wrapper))
	if _, err := os.Stat(filepath.Join(state, "runsc-checked", hex.EncodeToString(sum[:]))); err != nil {
		t.Errorf("no checked copy of runsc: %v", err)
	}

	// runsc changed between the check and the run.
	p := load()
	os.WriteFile(runsc, []byte(wrapper+"# changed\n"), 0o755)
	before := started()
	if _, err := run(p); !changed(err) {
		t.Errorf("a runsc changed since its check: %v, want an UntrustedError naming it", err)
	}
	if started() != before {
		t.Errorf("the changed runsc ran")
	}
	os.WriteFile(runsc, []byte(wrapper), 0o755)

	// runsc changed while a session lived: its next command is refused.
	s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: load()})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close(context.Background())
		}
	}()
	if _, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, "true"); err != nil || rep.ExitCode != 0 {
		t.Fatalf("control: a session's command: %v (exit %d)", err, rep.ExitCode)
	}
	os.WriteFile(runsc, []byte(wrapper+"# changed\n"), 0o755)
	before = started()
	if _, _, err := sessionSh(t, s, sandbox.ExecRequest{}, "true"); !changed(err) {
		t.Errorf("a session's command after its runsc changed: %v, want an UntrustedError naming it", err)
	}
	if started() != before {
		t.Errorf("the changed runsc ran")
	}
	// The session still ends, without the changed runsc.
	closed = true
	if _, err := s.Close(context.Background()); err != nil {
		t.Errorf("close: %v", err)
	}
	if started() != before {
		t.Errorf("the changed runsc ran to end the session")
	}
}
