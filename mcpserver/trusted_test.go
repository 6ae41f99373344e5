package mcpserver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/mcpserver"
	"github.com/moatbox/moat/policy"
)

// TestServeLocalKeepsTrustChecks: a trusted workspace policy handed to
// ServeLocal with the check Trust.Load made (moat mcp) keeps it in the
// session the in-process daemon makes from the policy's text: a secret
// program that changed after the check is not run, and the session is
// refused naming it. The control: unchanged, the program runs and the
// server serves. A Checked that is not the document sent is refused:
// the check cannot be moved onto another policy.
func TestServeLocalKeepsTrustChecks(t *testing.T) {
	ws := workspaceDir(t)
	path := filepath.Join(ws, ".moat.toml")
	const doc = `[network]
mode = "allow"
allow = ["api.test"]

[[secrets]]
name = "TOKEN"
source = "command:./mint"
hosts = ["api.test"]
`
	// It runs from / (the workspace is no place for it to start): it
	// names its directory.
	const mint = "#!/bin/sh\necho run >> \"$(dirname \"$0\")/ran\"\necho minted\n"
	for name, body := range map[string]string{".moat.toml": doc, "mint": mint} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	home, _ := os.UserHomeDir()
	trust := &policy.Trust{}
	if _, err := trust.Add(path, home); err != nil {
		t.Fatal(err)
	}
	load := func() *policy.Policy {
		t.Helper()
		p, err := trust.Load(path, home)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ran := func() string {
		b, _ := os.ReadFile(filepath.Join(ws, "ran"))
		return string(b)
	}
	// serve serves the policy, as moat mcp does, to a client that
	// connects and leaves, and returns ServeLocal's error.
	serve := func(text string, checked *policy.Policy) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ct, st := mcp.NewInMemoryTransports()
		errc := make(chan error, 1)
		go func() {
			errc <- mcpserver.ServeLocal(ctx, mcpserver.LocalConfig{StateDir: t.TempDir(), Policy: text, PolicyFile: path, Checked: checked, Workspace: ws}, st)
		}()
		go func() {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
			if err == nil {
				cs.Close()
			}
		}()
		return <-errc
	}

	// The control: unchanged, the source runs and the session serves.
	if err := serve(doc, load()); err != nil || ran() != "run\n" {
		t.Fatalf("control: %v, source ran %q", err, ran())
	}

	// The source changed between the check and the session.
	p := load()
	os.WriteFile(filepath.Join(ws, "mint"), []byte(mint+"echo changed >> \"$(dirname \"$0\")/ran\"\n"), 0o755)
	err := serve(doc, p)
	var ue *policy.UntrustedError
	if !errors.As(err, &ue) || ue.File != filepath.Join(ws, "mint") || ue.Reason != policy.TrustChanged {
		t.Errorf("a source changed since its check: %v, want an UntrustedError naming it", err)
	}
	if ran() != "run\n" {
		t.Errorf("the changed source ran: %q", ran())
	}
	os.WriteFile(filepath.Join(ws, "mint"), []byte(mint), 0o755)

	// Another document than the one checked.
	if err := serve(doc+"# another\n", load()); !errors.Is(err, daemon.ErrBadRequest) || !errors.Is(err, policy.ErrNotChecked) {
		t.Errorf("a document other than the checked one: %v, want it refused", err)
	}
	if ran() != "run\n" {
		t.Errorf("the source ran for a refused session: %q", ran())
	}
}
