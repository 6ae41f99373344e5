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

// denyID is a policy edit that denies id, and sets PATH when path is
// not empty.
func denyID(deny bool, path string) func(*policy.Policy) {
	return func(p *policy.Policy) {
		if deny {
			p.Rules = append(p.Rules, policy.Rule{Name: "no-id", Match: policy.Match{Command: []string{"id"}}, Decision: "deny"})
		}
		if path != "" {
			if p.Env.Set == nil {
				p.Env.Set = map[string]string{}
			}
			p.Env.Set["PATH"] = path
		}
	}
}

// runSession is run with an overlay workspace whose change set is the
// session's.
func runSession(t *testing.T, ws, session string, edit func(*policy.Policy), args ...string) result {
	t.Helper()
	p := policy.Default()
	p.Workspace.Path, p.Workspace.Mode = ws, policy.WorkspaceOverlay
	edit(p)
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: args, Session: session},
		backend.Stdio{Stdout: &out, Stderr: &errb})
	if rep == nil {
		t.Fatalf("nil report (err %v)", err)
	}
	return result{rep, err, out.String(), errb.String()}
}

// TestFirstExecSeenAsTheSandboxSeesIt: the command line's own program is
// decided on the host before the run, and the direct start lets its exec
// through unasked; where the sandbox starts another file than the host
// found, a program a deny rule names ran. An overlay session's change set
// held a link ./tool -> id the last run made (the host saw no ./tool),
// and, for root, a PATH directory of mode 0 held a harmless foo for root
// and none for the command, whose search went on to a foo that is id
// (both found by a tester). Each is refused now; the controls: without
// the rule, id runs.
func TestFirstExecSeenAsTheSandboxSeesIt(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	t.Run("overlay session", func(t *testing.T) {
		for _, deny := range []bool{true, false} {
			ws := t.TempDir()
			session := "s" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
			if deny {
				session += "-deny"
			}
			r := runSession(t, ws, session, denyID(deny, ""), "/bin/sh", "-c", "ln -s /usr/bin/id tool")
			mustExit(t, r, 0)
			r = runSession(t, ws, session, denyID(deny, ""), "./tool")
			switch ran := strings.Contains(r.stdout, "uid="); {
			case deny && ran:
				t.Errorf("./tool, a link to id in the session's change set, ran: %q", r.stdout)
			case !deny && !ran:
				t.Errorf("control: ./tool did not run id: %q %q %v", r.stdout, r.stderr, r.err)
			}
		}
	})
	// The same link to a program an allow rule names runs: an allow
	// by a rule goes through the exec check's recorded path, which must
	// not refuse it.
	t.Run("overlay session allowed by a rule", func(t *testing.T) {
		ws := t.TempDir()
		allowID := func(p *policy.Policy) {
			p.Rules = append(p.Rules, policy.Rule{Name: "yes-id", Match: policy.Match{Command: []string{"id"}}, Decision: "allow"})
		}
		// The host sees a script no rule names; the session's change
		// set holds the link.
		os.WriteFile(filepath.Join(ws, "tool"), []byte("#!/bin/sh\necho plain\n"), 0o755)
		r := runSession(t, ws, "s-allow", allowID, "/bin/sh", "-c", "ln -sf /usr/bin/id tool")
		mustExit(t, r, 0)
		r = runSession(t, ws, "s-allow", allowID, "./tool")
		if !strings.Contains(r.stdout, "uid=") {
			t.Errorf("./tool, a link to id that a rule allows, did not run: %q %q %v", r.stdout, r.stderr, r.err)
		}
	})
	t.Run("path directory the command cannot search", func(t *testing.T) {
		// For an ordinary user the host's search fails where the
		// command's does: the same outcome, by the host's decision.
		for _, deny := range []bool{true, false} {
			ws := t.TempDir()
			os.Chmod(ws, 0o755)
			a, b := filepath.Join(ws, "a"), filepath.Join(ws, "b")
			os.Mkdir(a, 0o755)
			os.Mkdir(b, 0o755)
			os.Symlink("/usr/bin/true", filepath.Join(a, "foo"))
			os.Symlink("/usr/bin/id", filepath.Join(b, "foo"))
			os.Chmod(a, 0)
			r := run(t, ws, denyID(deny, a+":"+b+":/usr/bin:/bin"), "foo")
			switch ran := strings.Contains(r.stdout, "uid="); {
			case deny && ran:
				t.Errorf("foo, id on the command's PATH search, ran: %q", r.stdout)
			case !deny && !ran:
				t.Errorf("control: foo did not run id: %q %q %v", r.stdout, r.stderr, r.err)
			}
			os.Chmod(a, 0o755)
		}
	})
}

// TestFirstExecOnAHostOnlyPath: a PATH directory the sandbox does not
// show held a harmless program for the host's lookup, and the command's
// own search went on to a link to a denied program in the workspace
// (found by a tester): refused now. The control: without the rule, the
// linked program runs.
func TestFirstExecOnAHostOnlyPath(t *testing.T) {
	hostbin := t.TempDir()
	// Searchable by others, so that root's lookup is not refused for its
	// modes (lineSeenAlike's other test): this test is about where.
	os.Chmod(filepath.Dir(hostbin), 0o755)
	os.Chmod(hostbin, 0o755)
	os.WriteFile(filepath.Join(hostbin, "deploy"), []byte("#!/bin/sh\necho harmless\n"), 0o755)
	for _, deny := range []bool{true, false} {
		ws := t.TempDir()
		os.Chmod(ws, 0o755)
		os.Mkdir(filepath.Join(ws, "bin"), 0o755)
		os.Symlink("/usr/bin/id", filepath.Join(ws, "bin", "deploy"))
		r := run(t, ws, denyID(deny, hostbin+":/usr/bin:/bin:"+filepath.Join(ws, "bin")), "deploy")
		switch ran := strings.Contains(r.stdout, "uid="); {
		case deny && ran:
			t.Errorf("deploy, id on the command's PATH search, ran: %q", r.stdout)
		case !deny && !ran:
			t.Errorf("control: deploy did not run id: %q %q %v", r.stdout, r.stderr, r.err)
		}
	}
}

// TestFirstExecThroughAHostOnlyHop: a link whose way goes through a
// directory only the host has (hostonly/../../../usr/bin/true) resolves to
// a harmless program on the host and to nothing in the sandbox, whose
// PATH search goes on to a link to a denied program (found by a
// reviewer): refused now. The control: without the rule, id runs.
func TestFirstExecThroughAHostOnlyHop(t *testing.T) {
	hostonly := t.TempDir()
	os.Chmod(filepath.Dir(hostonly), 0o755) // as above: about where, not modes
	os.Chmod(hostonly, 0o755)
	depth := strings.Count(strings.Trim(hostonly, "/"), "/") + 1
	target := hostonly + strings.Repeat("/..", depth) + "/usr/bin/true"
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("control: %s on the host: %v", target, err)
	}
	for _, deny := range []bool{true, false} {
		ws := t.TempDir()
		os.Chmod(ws, 0o755)
		for _, d := range []string{"bin", "bin2"} {
			os.Mkdir(filepath.Join(ws, d), 0o755)
		}
		os.Symlink(target, filepath.Join(ws, "bin", "tool"))
		os.Symlink("/usr/bin/id", filepath.Join(ws, "bin2", "tool"))
		r := run(t, ws, denyID(deny, filepath.Join(ws, "bin")+":"+filepath.Join(ws, "bin2")+":/usr/bin:/bin"), "tool")
		switch ran := strings.Contains(r.stdout, "uid="); {
		case deny && ran:
			t.Errorf("tool, id on the command's PATH search, ran: %q", r.stdout)
		case !deny && !ran:
			t.Errorf("control: tool did not run id: %q %q %v", r.stdout, r.stderr, r.err)
		}
	}
}
