package harness

import (
	"testing"

	"github.com/moatbox/moat/policy"
)

// TestDeleteOutsideConfined: delete-outside does not ask about rm -rf of
// an absolute path into the workspace or the sandbox's own /tmp,
// /dev/shm and home, and still asks about the workspace whole, one above
// it, in or above a read_write path, through .., through ~ or a variable,
// or anywhere else. The
// controls are the same deletions under policies where the harness
// cannot know where they land.
func TestDeleteOutsideConfined(t *testing.T) {
	p := policy.Default()
	p.Workspace.Path = "/work/proj"
	p.Filesystem.ReadWrite = []string{"/tmp/cache", "/home/agent/.npm"}
	rs := New(p)
	allowed := [][]string{
		{"rm", "-rf", "/work/proj/build"},
		{"rm", "-rf", "/work/proj/*"}, // as rm -rf * is
		{"rm", "-rf", "/work/proj/dist/*"},
		{"rm", "-rf", "/tmp/build", "/dev/shm/x", "node_modules"},
		{"rm", "-rf", "/tmp/build-*"},
		{"rm", "-fr", "--", "/tmp/x"},
		{"rm", "/tmp/x", "-rf"},
		{"rm", "-rf", "/home/agent/.cache"},
		{"rm", "-f", "/work/proj/notes.txt~"},
		{"sh", "-c", "cd /tmp && rm -rf /tmp/a /work/proj/b"},
		{"/bin/rm", "-rf", "/work/proj/target"},
	}
	asked := [][]string{
		{"rm", "-rf", "/"},
		{"rm", "-rf", "/*"},
		{"rm", "-rf", "/etc/x"},
		{"rm", "-rf", "/work/proj"},              // the workspace whole
		{"rm", "-rf", "/work/proj/"},             // the same
		{"rm", "-rf", "/work"},                   // above the workspace
		{"rm", "-rf", "/work/other"},             // beside it
		{"rm", "-rf", "/work/project"},           // a name that only starts the same
		{"rm", "-rf", "/tmp/cache"},              // a read_write path
		{"rm", "-rf", "/tmp/cache/x"},            // in one
		{"rm", "-rf", "/tmp"},                    // above one
		{"rm", "-rf", "/tmp/*"},                  // a glob that names one
		{"rm", "-rf", "/tmp/c*/x"},               // a glob above one
		{"rm", "-rf", "/tmp/[a-d]*"},             // one too
		{"rm", "-rf", "/work/*"},                 // one that names the workspace
		{"rm", "-rf", "/home/agent"},             // above /home/agent/.npm
		{"rm", "-rf", "/home/agent/.npm/_cache"}, // in it
		{"rm", "-r", "~/x"},                      // HOME may be set to anything
		{"sh", "-c", "HOME=/srv; rm -rf ~/x"},
		{"sh", "-c", "rm -rf $HOME/.cache/pip"},
		{"sh", "-c", `rm -rf "$HOME"/x`},
		{"rm", "-rf", "/work/proj/../x"},  // through ..
		{"rm", "-rf", "/tmp/x/../../etc"}, // through ..
		{"rm", "-rf", "/tmp/x", "../y"},   // one operand through ..
		{"rm", "-rf", "/tmp/x", "/srv/y"}, // one operand outside
		{"rm", "-rf", "/tmp/{a,b}"},       // a brace expansion
		{"rm", "-rf", `/tmp/a\b`},
		{"sh", "-c", "rm -rf $D/x /tmp/y"},
		{"sh", "-c", "rm -rf /tmp/$D"},
	}
	check := func(rs *Rules, argv []string, want Verdict) {
		t.Helper()
		d := rs.Decide(Action{Argv: argv})
		if d.Verdict != want || want == Ask && (d.Rule == nil || d.Rule.Name != "delete-outside") {
			t.Errorf("Decide(%q) = %s %v, want %s", argv, d.Verdict, d.Rule, want)
		}
		if argv[0] == "sh" {
			return
		}
		if d := rs.DecideExec("", argv); d.Verdict != want {
			t.Errorf("DecideExec(%q) = %s, want %s", argv, d.Verdict, want)
		}
	}
	for _, argv := range allowed {
		check(rs, argv, Allow)
	}
	for _, argv := range asked {
		check(rs, argv, Ask)
	}

	// Where the harness cannot know where a path lands, it asks.
	unresolved := policy.Default() // workspace "." until resolved
	check(New(unresolved), []string{"rm", "-rf", "/work/proj/build"}, Ask)
	check(New(unresolved), []string{"rm", "-rf", "/tmp/build"}, Allow)
	passed := policy.Default()
	delete(passed.Env.Set, "HOME")
	passed.Env.Pass = append(passed.Env.Pass, "HOME")
	check(New(passed), []string{"rm", "-rf", "/home/agent/x"}, Ask)
	check(New(passed), []string{"rm", "-rf", "/tmp/x"}, Allow)
	unexpanded := policy.Default()
	unexpanded.Filesystem.ReadWrite = []string{"~/.cache/pip"}
	check(New(unexpanded), []string{"rm", "-rf", "/tmp/x"}, Ask)
	// A policy's own rule is never narrowed.
	own := mustPolicy(t, `
[workspace]
path = "/work/proj"
[[rules]]
match = { command = ["rm"] }
decision = "ask"
`)
	if d := New(own).Decide(Action{Argv: []string{"rm", "-rf", "/work/proj/x"}}); d.Verdict != Ask || d.Rule == nil || d.Rule.Set != SetPolicy {
		t.Errorf("a policy's rule: %s %v, want ask by it", d.Verdict, d.Rule)
	}
}
