package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestIsolationIsAFloor: a library caller's backend never runs a policy
// with less isolation than it asks for. A policy with sandbox.isolation
// = "gvisor" handed a native backend is refused, for a run and for a
// session, before anything runs; the same backend runs the native policy
// (the positive control).
func TestIsolationIsAFloor(t *testing.T) {
	ws := t.TempDir()
	mark := filepath.Join(ws, "ran")
	args := []string{"/bin/sh", "-c", "echo x > " + mark}
	for _, iso := range []string{policy.IsolationGVisor, policy.IsolationNative} {
		t.Run(iso, func(t *testing.T) {
			p := workspacePolicy(t, ws)
			p.Sandbox.Isolation, p.Harness.Builtin = iso, []string{}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			os.Remove(mark)
			var errb bytes.Buffer
			rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: &native.Backend{}, Policy: p, Args: args}, backend.Stdio{Stderr: &errb})
			_, statErr := os.Stat(mark)
			if iso == policy.IsolationNative {
				if err != nil || rep.ExitCode != 0 || statErr != nil {
					t.Fatalf("native policy on the native backend: %v, %+v, %s", err, rep, errb.String())
				}
				return
			}
			if !errors.Is(err, sandbox.ErrRefused) || !strings.Contains(err.Error(), `"gvisor"`) || rep.ExitCode != 125 || statErr == nil {
				t.Fatalf("gvisor policy on the native backend: err %v, report %+v, ran: %v", err, rep, statErr == nil)
			}
			s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Backend: &native.Backend{}, Policy: p})
			if err == nil {
				s.Close(context.Background())
				t.Fatal("a session of a gvisor policy was made on the native backend")
			}
			if !errors.Is(err, sandbox.ErrRefused) {
				t.Fatalf("session: %v", err)
			}
		})
	}
}
