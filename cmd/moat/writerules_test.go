//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestPolicyExplainWrite: `moat policy explain --write PATH` says which
// write rule decides a change the API makes; a path out of the workspace
// or no path is a usage error.
func TestPolicyExplainWrite(t *testing.T) {
	dir := t.TempDir()
	pol := writePolicy(t, dir, "[[rules]]\nname = \"no-deploy\"\nmatch = { write = \"deploy/**\" }\ndecision = \"deny\"\nreason = \"deploy files go live\"\nexamples_match = [\"deploy/a.yaml\"]\n")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--policy", pol, "--write", "deploy/x.yaml"}, 0, "deny by rule no-deploy (" + pol + ":1): deploy files go live"},
		{[]string{"--write=src/x", "--policy", pol}, 0, "allowed: no rule matches"},
		{[]string{"--policy", pol, "--write", "/etc/passwd"}, 2, "relative to the workspace"},
		{[]string{"--policy", pol, "--write"}, 2, "--write needs a path"},
		{[]string{"--policy", pol, "--write", "a", "--", "git", "push"}, 2, "usage"},
	} {
		code, out, errs := moat(t, dir, append([]string{"policy", "explain"}, tt.args...)...)
		if code != tt.code || !strings.Contains(out+errs, tt.want) {
			t.Errorf("policy explain %q = %d %q %q, want %d %q", tt.args, code, out, errs, tt.code, tt.want)
		}
	}
	// The path is read whole (before, "the rules read it as: y" named its
	// last component, tried).
	if _, out, _ := moat(t, dir, "policy", "explain", "--policy", pol, "--write", "deploy/sub/y"); strings.Contains(out, "read it as") {
		t.Errorf("policy explain --write deploy/sub/y: %q", out)
	}
}
