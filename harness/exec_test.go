package harness

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/policy"
)

func TestDecideExec(t *testing.T) {
	rs := New(mustPolicy(t, `
[[rules]]
name = "no-rm-rf"
match = { command = ["rm", "-rf"] }
decision = "deny"
reason = "no"
`))
	tests := []struct {
		path    string
		argv    []string
		verdict Verdict
		rule    string
	}{
		{"/usr/bin/git", []string{"git", "push"}, Ask, "irreversible/git-push"},
		{"/usr/bin/git", []string{"git", "status"}, Allow, ""},
		// The path names the program when argv[0] lies about it.
		{"/usr/bin/git", []string{"innocent", "push"}, Ask, "irreversible/git-push"},
		{"/bin/rm", []string{"rm", "-rf", "x"}, Deny, "no-rm-rf"},
		// No shell parsing: the shell's programs are checked as it starts
		// them, each once.
		{"/bin/sh", []string{"sh", "-c", "git push"}, Allow, ""},
		{"/usr/bin/env", []string{"env", "git", "push"}, Allow, ""},
		{"", nil, Allow, ""},
	}
	for _, tt := range tests {
		d := rs.DecideExec(tt.path, tt.argv)
		rule := ""
		if d.Rule != nil {
			rule = d.Rule.Name
			if d.Rule.Set != SetPolicy {
				rule = d.Rule.Set + "/" + rule
			}
		}
		if d.Verdict != tt.verdict || rule != tt.rule {
			t.Errorf("DecideExec(%q, %q) = %s by %q, want %s by %q", tt.path, tt.argv, d.Verdict, rule, tt.verdict, tt.rule)
		}
	}
	if rs.Empty() {
		t.Error("rules with the built-in set are empty")
	}
	off := policy.Default()
	off.Harness.Builtin = nil
	if !New(off).Empty() {
		t.Error("no rules and no built-in set are not empty")
	}
}

func TestAsks(t *testing.T) {
	rs := New(policy.Default())
	got := rs.Asks(Action{Argv: []string{"sh", "-c", "make && git push && git push && npm publish"}})
	want := [][]string{{"git", "push"}, {"git", "push"}, {"npm", "publish"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("Asks = %q, want %q", got, want)
	}
}

func TestApprovals(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ap := &Approvals{Now: func() time.Time { return now }}
	gitPush := &RuleRef{Set: "irreversible", Name: "git-push"}
	npm := &RuleRef{Set: "irreversible", Name: "npm-publish"}
	ask := func(r *RuleRef) Decision { return Decision{Verdict: Ask, Rule: r} }
	ap.Add(Grant{Scope: ScopeOnce, Argv: []string{"git", "push"}, Dir: "/w"})
	if _, ok := ap.Use([]string{"git", "push"}, "/elsewhere", ask(gitPush)); ok {
		t.Error("a once grant covered another working directory")
	}
	if _, ok := ap.Use([]string{"git", "push", "-f"}, "/w", ask(gitPush)); ok {
		t.Error("a once grant covered another argv")
	}
	if _, ok := ap.Use([]string{"git", "push"}, "/w", Decision{Verdict: Deny, Rule: gitPush}); ok {
		t.Error("a grant covered a deny")
	}
	if _, ok := ap.Use([]string{"git", "push"}, "/w", ask(gitPush)); !ok {
		t.Error("a once grant did not cover its own command")
	}
	if _, ok := ap.Use([]string{"git", "push"}, "/w", ask(gitPush)); ok {
		t.Error("a once grant was used twice")
	}

	ap.Add(Grant{Scope: ScopePrefix, Argv: []string{"git", "push", "origin"}, Expires: now.Add(time.Minute)})
	for i := range 2 {
		if _, ok := ap.Use([]string{"git", "push", "origin", "main"}, "/w", ask(gitPush)); !ok {
			t.Errorf("use %d: a prefix grant did not cover a command beginning with it", i)
		}
	}
	if _, ok := ap.Use([]string{"git", "push", "upstream"}, "/w", ask(gitPush)); ok {
		t.Error("a prefix grant covered another command")
	}

	ap.Add(Grant{Scope: ScopeSession, Rule: npm, Expires: now.Add(2 * time.Minute)})
	if _, ok := ap.Use([]string{"npm", "publish", "--tag", "x"}, "/w", ask(npm)); !ok {
		t.Error("a session grant did not cover its rule's ask")
	}
	if _, ok := ap.Use([]string{"git", "push", "x"}, "/w", ask(gitPush)); ok {
		t.Error("a session grant covered another rule's ask")
	}

	now = now.Add(90 * time.Second)
	if _, ok := ap.Use([]string{"git", "push", "origin"}, "/w", ask(gitPush)); ok {
		t.Error("an expired prefix grant still covered")
	}
	if _, ok := ap.Use([]string{"npm", "publish"}, "/w", ask(npm)); !ok {
		t.Error("an unexpired session grant no longer covered")
	}
	now = now.Add(time.Minute)
	if _, ok := ap.Use([]string{"npm", "publish"}, "/w", ask(npm)); ok {
		t.Error("an expired session grant still covered")
	}
}

func TestNewGrant(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rule := &RuleRef{Set: "irreversible", Name: "git-push"}
	a := Action{Argv: []string{"sh", "-c", "make && git push origin main"}, Dir: "/w"}
	d := Decision{Verdict: Ask, Rule: rule, Command: []string{"git", "push", "origin", "main"}}
	tests := []struct {
		scope  Scope
		prefix []string
		ttl    time.Duration
		err    string
	}{
		{ScopeOnce, nil, 0, ""},
		{ScopePrefix, []string{"git", "push"}, time.Hour, ""},
		{ScopePrefix, []string{"git", "push"}, 0, "needs an expiry"},
		{ScopePrefix, []string{"git", "pull"}, time.Hour, "does not begin"},
		{ScopePrefix, nil, time.Hour, "does not begin"},
		{ScopePrefix, []string{"git", "push", "origin", "main", "-f"}, time.Hour, "does not begin"},
		{ScopeSession, nil, time.Hour, ""},
		{ScopeSession, nil, 48 * time.Hour, "from 0 to"},
		{"always", nil, time.Hour, "unknown scope"},
	}
	for _, tt := range tests {
		g, err := NewGrant(tt.scope, a, d, tt.prefix, tt.ttl, "tty", now)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s %q %s: %v, want %q", tt.scope, tt.prefix, tt.ttl, err, tt.err)
			}
			continue
		}
		if err != nil || g.By != "tty" || tt.ttl > 0 && !g.Expires.Equal(now.Add(tt.ttl)) {
			t.Errorf("%s: %+v, %v", tt.scope, g, err)
		}
	}
	if _, err := NewGrant(ScopeSession, a, Decision{Verdict: Ask, Reason: "eval"}, nil, time.Hour, "tty", now); err == nil {
		t.Error("a session grant for an ask no rule made")
	}
}

// TestDecideGitSubcommandProgram: git's subcommand programs (git-push in
// its exec-path) are decided as `git SUB`, on a command line and at exec,
// under any argv[0]. Positive control: git-status, and a program merely
// named git, are allowed.
func TestDecideGitSubcommandProgram(t *testing.T) {
	rs := New(policy.Default())
	for _, tt := range []struct {
		path string
		argv []string
		want Verdict
	}{
		{"/usr/lib/git-core/git-push", []string{"git-push", "origin", "main"}, Ask},
		{"/usr/lib/git-core/git-push", []string{"x", "origin", "main"}, Ask},
		{"", []string{"/usr/lib/git-core/git-push", "origin"}, Ask},
		{"/usr/lib/git-core/git-send-pack", []string{"git-send-pack", "../bare.git", "HEAD:main"}, Ask},
		{"/usr/lib/git-core/git-status", []string{"git-status"}, Allow},
		{"/usr/bin/git", []string{"git", "status"}, Allow},
		{"/usr/bin/git-", []string{"git-"}, Allow},
	} {
		if d := rs.DecideExec(tt.path, tt.argv); d.Verdict != tt.want {
			t.Errorf("DecideExec(%q, %q) = %s, want %s", tt.path, tt.argv, d.Verdict, tt.want)
		}
	}
	if d := rs.Decide(Action{Argv: []string{"sh", "-c", "git-push origin main"}}); d.Verdict != Ask || d.Rule == nil || d.Rule.Name != "git-push" {
		t.Errorf("the line git-push origin main: %+v, want the git-push rule's ask", d)
	}
}

// TestDecideLoader: the dynamic loader is a wrapper, on a command line
// and at exec: the program it runs is decided, past its options.
// Positive control: the loader running an allowed program, or alone.
func TestDecideLoader(t *testing.T) {
	rs := New(policy.Default())
	ld := "/lib64/ld-linux-x86-64.so.2"
	for _, tt := range []struct {
		path string
		argv []string
		want Verdict
	}{
		{ld, []string{ld, "/usr/bin/git", "push", "origin", "main"}, Ask},
		{ld, []string{"x", "--library-path", "/lib", "--inhibit-cache", "/usr/bin/git", "push"}, Ask},
		{ld, []string{ld, "--argv0", "git", "/tmp/y", "push"}, Ask},
		{"/lib/ld-musl-x86_64.so.1", []string{"ld", "--preload", "x.so", "/usr/bin/git", "push"}, Ask},
		{"/usr/bin/ld.so", []string{"ld.so", "--", "git", "push"}, Ask},
		{"/lib/ld-linux-aarch64.so.1", []string{"ld", "/bin/rm", "-rf", "/srv/victim"}, Ask},
		// Positive controls.
		{ld, []string{ld, "/usr/bin/git", "status"}, Allow},
		{ld, []string{ld, "--list", "/usr/bin/git"}, Allow},
		{ld, []string{ld, "--help"}, Allow},
		{"/usr/bin/ldd", []string{"ldd", "/usr/bin/git", "push"}, Allow},
	} {
		if d := rs.DecideExec(tt.path, tt.argv); d.Verdict != tt.want {
			t.Errorf("DecideExec(%q, %q) = %s, want %s", tt.path, tt.argv, d.Verdict, tt.want)
		}
	}
	for _, line := range [][]string{
		{ld, "/usr/bin/git", "push", "origin", "main"},
		{"sh", "-c", "/lib64/ld-linux-x86-64.so.2 --library-path /lib /usr/bin/git push"},
	} {
		if d := rs.Decide(Action{Argv: line}); d.Verdict != Ask || d.Rule == nil || d.Rule.Name != "git-push" {
			t.Errorf("the line %q: %+v, want the git-push rule's ask", line, d)
		}
	}
	if d := rs.Decide(Action{Argv: []string{ld, "/usr/bin/git", "status"}}); d.Verdict != Allow {
		t.Errorf("ld.so git status: %s, want allow", d.Verdict)
	}
}

// TestDecideMultiCall: a multi-call binary (busybox, toybox) runs the
// applet its first operand names, in its own process, with no exec of
// its own to check: `busybox wget URL` is decided as `wget URL` too, on
// a command line and at exec. Positive control: an applet no rule
// matches, and the binary alone.
func TestDecideMultiCall(t *testing.T) {
	rs := New(mustPolicy(t, `
[[rules]]
name = "no-wget"
match = { command = ["wget"] }
decision = "deny"
`))
	for _, tt := range []struct {
		path string
		argv []string
		want Verdict
	}{
		{"/bin/busybox", []string{"busybox", "wget", "http://x"}, Deny},
		{"/tmp/bb", []string{"/tmp/busybox", "wget", "http://x"}, Deny},
		// busybox takes any name it is started by that begins so as its
		// own, and an applet named by a path.
		{"/tmp/bb", []string{"busyboxZ", "/usr/bin/wget", "http://x"}, Deny},
		{"/bin/toybox", []string{"toybox", "wget", "http://x"}, Deny},
		{"/bin/busybox", []string{"busybox", "git", "push"}, Ask},
		// Positive controls.
		{"/bin/busybox", []string{"busybox", "ls", "wget"}, Allow},
		{"/bin/busybox", []string{"busybox", "--list"}, Allow},
		{"/bin/busybox", []string{"busybox"}, Allow},
	} {
		if d := rs.DecideExec(tt.path, tt.argv); d.Verdict != tt.want {
			t.Errorf("DecideExec(%q, %q) = %s, want %s", tt.path, tt.argv, d.Verdict, tt.want)
		}
	}
	for _, line := range [][]string{
		{"busybox", "wget", "http://x"},
		{"sh", "-c", "busybox wget http://x"},
		{"busybox", "env", "wget", "http://x"},
		{"busybox", "sh", "-c", "wget http://x"},
	} {
		if d := rs.Decide(Action{Argv: line}); d.Verdict != Deny || d.Rule == nil || d.Rule.Name != "no-wget" {
			t.Errorf("the line %q: %+v, want the no-wget rule's deny", line, d)
		}
	}
	if d := rs.Decide(Action{Argv: []string{"busybox", "ls", "wget"}}); d.Verdict != Allow {
		t.Errorf("busybox ls wget: %s, want allow", d.Verdict)
	}
}
