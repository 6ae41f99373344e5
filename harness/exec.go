package harness

import "path"

// DecideExec checks a program about to start inside the sandbox, as its
// execve gave it: path is the program as given, argv its arguments. It
// parses nothing: a shell's line is checked as the shell starts each of
// its programs, a wrapper's (env, xargs, timeout) as it starts the one it
// wraps, so every program is checked once, by its own argv. The rules see
// argv[0] as the program's name, as on a command line; where path names
// another program (execve("/usr/bin/git", ["x", "push"])), argv is
// checked with path in its place too, and the stronger decision wins.
func (rs *Rules) DecideExec(path string, argv []string) Decision {
	if len(argv) == 0 {
		if path == "" {
			return Decision{Verdict: Allow}
		}
		argv = []string{path}
	}
	d := rs.decideOne(simple{argv: argv})
	if path == "" || baseName(path) == baseName(argv[0]) {
		return d
	}
	alt := append([]string{path}, argv[1:]...)
	if da := rs.decideOne(simple{argv: alt}); da.Verdict.rank() > d.Verdict.rank() {
		return da
	}
	return d
}

func baseName(p string) string { return path.Base(p) }

// Empty reports whether rs has no command rule: a check of each program
// started would have nothing to decide.
func (rs *Rules) Empty() bool { return len(rs.policy) == 0 && len(rs.builtin) == 0 }

// Asks returns the simple commands of a's line that the rules ask about:
// what a person approving the line has seen, and has approved when the
// line's programs start. A command the line runs twice is listed twice.
func (rs *Rules) Asks(a Action) [][]string {
	var out [][]string
	for _, c := range split(a.Argv) {
		if d := rs.decideOne(c); d.Verdict == Ask {
			out = append(out, c.argv)
		}
	}
	return out
}
