package harness

import (
	"slices"
	"testing"
)

// TestDecideExecTieNamesWhatRuns: when the name a program was called by
// and the file that runs are both asked about, the question is about the
// file: execve("/usr/bin/git", ["uname", "push", ...]) was asked as
// uname, and a person's grant for uname then let git push run (found by a
// tester). The controls: a stronger decision about the name still wins
// (a deny of uname over an ask of id), and an allowed file leaves the
// name's ask as it is.
func TestDecideExecTieNamesWhatRuns(t *testing.T) {
	rs := New(mustPolicy(t, `
[[rules]]
name = "ask-uname"
match = { command = ["uname"] }
decision = "ask"

[[rules]]
name = "ask-id"
match = { command = ["id"] }
decision = "ask"

[[rules]]
name = "ask-busybox"
match = { command = ["busybox"] }
decision = "ask"

[[rules]]
name = "no-whoami"
match = { command = ["whoami"] }
decision = "deny"
`))
	for _, tc := range []struct {
		path    string
		argv    []string
		verdict Verdict
		rule    string
		first   string
	}{
		{"/usr/bin/git", []string{"uname", "push", "origin"}, Ask, "git-push", "/usr/bin/git"},
		{"/usr/bin/id", []string{"uname", "-a"}, Ask, "ask-id", "/usr/bin/id"},
		{"/usr/bin/id", []string{"whoami"}, Deny, "no-whoami", "whoami"},
		{"/usr/bin/true", []string{"uname", "-a"}, Ask, "ask-uname", "uname"},
		// busybox runs the applet its argv[0] names: that name wins.
		{"/usr/bin/busybox", []string{"id", "--help"}, Ask, "ask-id", "id"},
	} {
		d := rs.DecideExec(tc.path, tc.argv)
		if d.Verdict != tc.verdict || d.Rule == nil || d.Rule.Name != tc.rule || len(d.Command) == 0 || d.Command[0] != tc.first {
			t.Errorf("DecideExec(%s, %q) = %s %+v %q, want %s by %s naming %s", tc.path, tc.argv, d.Verdict, d.Rule, d.Command, tc.verdict, tc.rule, tc.first)
		}
	}
	if d := rs.DecideExec("/usr/bin/git", []string{"uname", "push"}); !slices.Contains(d.Command, "push") {
		t.Errorf("the question's words: %q", d.Command)
	}
}
