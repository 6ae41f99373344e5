package harness

import (
	"testing"

	"github.com/moatbox/moat/policy"
)

// TestDeleteOutsideConfined: delete-outside does not ask about rm -rf of
// an absolute path into the workspace, as it does not about a relative
// one, and still asks about the workspace whole, a path above it or
// beside it, in or above a read_write path, through .., through ~ or a
// variable, and the sandbox's /tmp (which may hold a bound git
// directory). The controls are the same deletions under policies where
// the harness cannot know where they land.
func TestDeleteOutsideConfined(t *testing.T) {
	p := policy.Default()
	p.Workspace.Path = "/work/proj"
	p.Filesystem.ReadWrite = []string{"/work/proj/cache", "/srv/data"}
	rs := New(p)
	allowed := [][]string{
		{"rm", "-rf", "/work/proj/build"},
		{"rm", "-rf", "/work/proj/dist/*"},
		{"rm", "-rf", "/work/proj/*.o"},
		{"rm", "-rf", "/work/proj/build", "node_modules", "/work/proj/.venv"},
		{"rm", "-fr", "--", "/work/proj/x"},
		{"rm", "/work/proj/x", "-rf"},
		{"rm", "-f", "/work/proj/notes.txt~"},
		{"rm", "-rf", `"/work/proj/my dir"`},
		{"sh", "-c", "cd /work/proj && rm -rf /work/proj/a /work/proj/b"},
		{"/bin/rm", "-rf", "/work/proj/target"},
	}
	asked := [][]string{
		{"rm", "-rf", "/"},
		{"rm", "-rf", "/*"},
		{"rm", "-rf", "/etc/x"},
		{"rm", "-rf", "/work/proj"},         // the workspace whole
		{"rm", "-rf", "/work/proj/"},        // the same
		{"rm", "-rf", "/work"},              // above it
		{"rm", "-rf", "/work/*"},            // a glob that names it
		{"rm", "-rf", "/work/other"},        // beside it
		{"rm", "-rf", "/work/project"},      // a name that only starts the same
		{"rm", "-rf", "/work/proj/cache"},   // a read_write path
		{"rm", "-rf", "/work/proj/cache/x"}, // in one
		{"rm", "-rf", "/work/proj/*"},       // a glob that names one
		{"rm", "-rf", "/work/proj/c*/x"},    // one above one
		{"rm", "-rf", "/work/proj/[a-d]*"},  // the same
		{"rm", "-rf", "/work/proj/C*"},      // the same, under nocaseglob
		{"bash", "-c", "shopt -s extglob; rm -rf /work/proj/!(x)"},
		{"rm", "-rf", "/work/proj/*(/)"},      // a zsh qualifier
		{"rm", "-rf", "/srv/data/x"},          // a read_write path elsewhere
		{"rm", "-rf", "/tmp/x"},               // may hold a bound git directory
		{"rm", "-rf", "/work/proj/../x"},      // through ..
		{"rm", "-rf", "/work/proj/a/../../x"}, // the same
		{"rm", "-rf", "/work/proj/x", "../y"}, // one operand through ..
		{"rm", "-rf", "/work/proj/x", "/srv/y"},
		{"rm", "-rf", "/work/proj/{a,b}"}, // a brace expansion
		{"rm", "-rf", `/work/proj/a\b`},
		{"rm", "-r", "~/x"}, // HOME may be set to anything
		{"sh", "-c", "HOME=/srv; rm -rf ~/x"},
		{"sh", "-c", "rm -rf $HOME/.cache/pip"},
		{"sh", "-c", "rm -rf $D/x /work/proj/y"},
		{"sh", "-c", "rm -rf /work/proj/$D"},
	}
	check := func(rs *Rules, argv []string, want Verdict) {
		t.Helper()
		d := rs.Decide(Action{Argv: argv})
		if d.Verdict != want || want == Ask && (d.Rule == nil || d.Rule.Name != "delete-outside") {
			t.Errorf("Decide(%q) = %s %v, want %s", argv, d.Verdict, d.Rule, want)
		}
		if argv[0] == "sh" || argv[0] == "bash" {
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
	unexpanded := policy.Default()
	unexpanded.Workspace.Path = "/work/proj"
	unexpanded.Filesystem.ReadWrite = []string{"~/.cache/pip"}
	check(New(unexpanded), []string{"rm", "-rf", "/work/proj/build"}, Ask)
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

// TestDeleteOutsideFromItsDirectory: a program's relative arguments are
// read from its working directory (a tester's cd /data && rm -rf sub,
// deleting a read_write path's content unasked): from outside the
// workspace it is asked about, from where a deletion outlives the
// sandbox; from inside the workspace (the control), or the sandbox's own
// /tmp, not.
func TestDeleteOutsideFromItsDirectory(t *testing.T) {
	p := policy.Default()
	p.Workspace.Path = "/work/proj"
	p.Filesystem.ReadWrite = []string{"/srv/data"}
	rs := New(p)
	for _, c := range []struct {
		dir  string
		argv []string
		want Verdict
	}{
		{"/srv/data", []string{"rm", "-rf", "sub", "f1"}, Ask},
		{"/srv", []string{"rm", "-rf", "data"}, Ask},
		{"/work/proj/src", []string{"rm", "-rf", "../x"}, Allow},
		{"/work", []string{"rm", "-rf", "proj"}, Ask},
		{"/work/proj", []string{"rm", "-rf", "build", "dist"}, Allow},
		{"/work/proj", []string{"rm", "-f", "x.o"}, Allow},
		{"", []string{"rm", "-rf", "sub"}, Ask}, // a directory not read: anywhere
		{"/srv/data", []string{"rm", "-rf", "--", "-x"}, Ask},
		// A reviewer's: a build under the sandbox's own /tmp, which no
		// deletion there outlives.
		{"/tmp/build", []string{"rm", "-f", "conftest.o"}, Allow},
		{"/tmp", []string{"rm", "-rf", "pip-build-x"}, Allow},
	} {
		if d := rs.DecideExecFrom(c.argv, c.dir); d.Verdict != c.want {
			t.Errorf("%q from %q: %s, want %s", c.argv, c.dir, d.Verdict, c.want)
		}
	}
	// A policy's allow of the words as written stands (a reviewer's).
	p.Rules = append(p.Rules, policy.Rule{Name: "tmp-build", Match: policy.Match{Command: []string{"rm", "-rf", "../tmp-build"}}, Decision: policy.DecisionAllow})
	if d := New(p).DecideExecFrom([]string{"rm", "-rf", "../tmp-build"}, "/work/proj"); d.Verdict != Allow {
		t.Errorf("a policy's allow of rm -rf ../tmp-build overridden: %s", d.Verdict)
	}
}

// TestDeleteOutsideInSandbox: rules that know the sandbox's mounts
// (InSandbox) do not ask about rm -rf of what is in its own /tmp, home or
// /dev/shm (found by a tester: a script's rm -rf "$(mktemp -d)" was
// refused), and still ask about a git directory bound writable there, the
// workspace when it lies under /tmp, a glob that may name either, and
// what is outside the sandbox's own trees. The control: the same
// deletions under the rules of the line, which know no mounts, ask.
func TestDeleteOutsideInSandbox(t *testing.T) {
	p := policy.Default()
	p.Workspace.Path = "/tmp/ws"
	p.Filesystem.ReadWrite = []string{"/srv/data"}
	line := New(p)
	rs := line.InSandbox([]string{"/tmp", "/home/agent", "/dev/shm"}, []string{"/tmp/ws", "/tmp/main/.git", "/srv/data", "/tmp/ws/.git/hooks"})
	own := [][]string{
		{"rm", "-rf", "/tmp/tmp.Xr4NQxfzpq"},
		{"rm", "-rf", "/tmp/build", "/tmp/ws/out"},
		{"rm", "-f", "/dev/shm/sem.x"},
		{"rm", "-rf", "/home/agent/.cache/pip"},
		{"rm", "-rf", "/tmp/t*"},
	}
	for _, argv := range own {
		if d := rs.DecideExec("", argv); d.Verdict != Allow {
			t.Errorf("in the sandbox, DecideExec(%q) = %s %v, want allow", argv, d.Verdict, d.Rule)
		}
		if d := line.DecideExec("", argv); d.Verdict != Ask {
			t.Errorf("the line's rules, DecideExec(%q) = %s, want ask", argv, d.Verdict)
		}
	}
	for _, argv := range [][]string{
		{"rm", "-rf", "/tmp/main/.git"},      // a git directory bound writable
		{"rm", "-rf", "/tmp/main/.git/refs"}, // in it
		{"rm", "-rf", "/tmp/main"},           // above it
		{"rm", "-rf", "/tmp/ws"},             // the workspace whole
		{"rm", "-rf", "/tmp"},                // above it
		{"rm", "-rf", "/tmp/*"},              // a glob that names it
		{"rm", "-rf", "/tmp/w?"},             // the same
		{"rm", "-rf", "/srv/data/x"},         // a read_write path
		{"rm", "-rf", "/etc/x"},              // outside
		{"rm", "-rf", "/home/agent/../x"},    // through ..
		{"rm", "-rf", "/dev/x"},              // /dev is not all the sandbox's
	} {
		if d := rs.DecideExec("", argv); d.Verdict != Ask {
			t.Errorf("in the sandbox, DecideExec(%q) = %s, want ask", argv, d.Verdict)
		}
	}
	// A bind in the workspace (a protected path) is the workspace's:
	// deleting in the workspace stays unasked.
	if d := rs.DecideExec("", []string{"rm", "-rf", "/tmp/ws/build"}); d.Verdict != Allow {
		t.Errorf("in the workspace: %s %v", d.Verdict, d.Rule)
	}
}
