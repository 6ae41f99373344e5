//go:build linux

package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestSecretProgramChangedAfterTrust: a trusted policy's secret program
// that changes after the trust was checked (Trust.Load) is not run: the
// source refuses the run, and a revoke that changed while the session
// lived is not run at its close, a warning instead. The control: the
// same programs unchanged run, mint and revoke.
func TestSecretProgramChangedAfterTrust(t *testing.T) {
	dir := t.TempDir()
	const doc = `[network]
mode = "allow"
allow = ["api.test"]

[[secrets]]
name = "TOKEN"
source = "command:./mint"
revoke = "./revoke"
hosts = ["api.test"]
`
	const mint = "#!/bin/sh\necho run >> ran\necho minted\n"
	const revoke = "#!/bin/sh\ncat >> revoked\n"
	path, trust, home := trustFiles(t, dir, map[string]string{".moat.toml": doc, "mint": mint, "revoke": revoke})
	load := func() *policy.Policy {
		t.Helper()
		p, err := trust.Load(path, home)
		if err != nil {
			t.Fatal(err)
		}
		ws := t.TempDir()
		p.Workspace.Path = ws
		if err := p.ResolveAndValidate(ws, home); err != nil {
			t.Fatal(err)
		}
		return p
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return string(b)
	}
	session := func(p *policy.Policy) *sandbox.Session {
		t.Helper()
		s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Backend: testBackend(), Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// The control: unchanged, both run.
	rep, err := session(load()).Close(context.Background())
	if err != nil || len(secretWarnings(rep.Warnings)) > 0 {
		t.Fatalf("close: %v %q", err, rep.Warnings)
	}
	if read("ran") != "run\n" || read("revoked") != "minted\n" {
		t.Fatalf("control: ran %q, revoked %q", read("ran"), read("revoked"))
	}

	// The source changed between the check and the run.
	p := load()
	os.WriteFile(filepath.Join(dir, "mint"), []byte(mint+"echo changed >> ran\n"), 0o755)
	_, err = sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"true"}}, backend.Stdio{})
	var ue *policy.UntrustedError
	if !errors.As(err, &ue) || ue.File != filepath.Join(dir, "mint") || ue.Reason != policy.TrustChanged {
		t.Errorf("a source changed since its check: %v, want an UntrustedError naming it", err)
	}
	if read("ran") != "run\n" {
		t.Errorf("the changed source ran: %q", read("ran"))
	}
	os.WriteFile(filepath.Join(dir, "mint"), []byte(mint), 0o755)

	// The revoke changed while the session lived.
	s := session(load())
	if read("ran") != "run\nrun\n" {
		t.Fatalf("the session's source did not run: %q", read("ran"))
	}
	os.WriteFile(filepath.Join(dir, "revoke"), []byte(revoke+"echo changed >> revoked\n"), 0o755)
	rep, err = s.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(rep.Warnings, "\n"); !strings.Contains(w, "not revoked") || !strings.Contains(w, "revoke") {
		t.Errorf("a revoke changed since its check: warnings %q, want one that says it did not run", rep.Warnings)
	}
	if read("revoked") != "minted\n" {
		t.Errorf("the changed revoke ran: %q", read("revoked"))
	}
}

// trustFiles writes files (the policy as .moat.toml among them, each
// executable) into dir and trusts the policy: the path to the policy,
// the trust store and the home it was checked under.
func trustFiles(t *testing.T, dir string, files map[string]string) (string, *policy.Trust, string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, ".moat.toml")
	home, _ := os.UserHomeDir()
	trust := &policy.Trust{}
	if _, err := trust.Add(path, home); err != nil {
		t.Fatal(err)
	}
	return path, trust, home
}
