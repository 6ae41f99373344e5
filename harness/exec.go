package harness

import (
	"path"
	"slices"
	"strings"
)

// DecideExec checks a program about to start inside the sandbox, as its
// execve gave it: path is the program as given, argv its arguments. It
// parses nothing: a shell's line is checked as the shell starts each of
// its programs, a wrapper's (env, xargs, timeout) as it starts the one it
// wraps, so every program is checked once, by its own argv. The rules see
// argv[0] as the program's name, as on a command line; where path names
// another program (execve("/usr/bin/git", ["x", "push"])), argv is
// checked with path in its place too, and the stronger decision wins.
//
// The dynamic loader (ld-linux-x86-64.so.2 /usr/bin/git push) is a
// wrapper: the program it runs is decided too, its options skipped.
func (rs *Rules) DecideExec(path string, argv []string) Decision {
	return rs.decideExec(path, argv, 0)
}

// ShellScriptFile returns, for a shell started on a script file (sh
// deploy.sh, not sh -c), the script and its arguments: the program that
// really runs, whose own exec no one sees. name is the shell's name, the
// path it was started by or argv[0] (a shell started as x by its path is
// a shell too). A multi-call binary started on its shell applet (busybox
// sh deploy.sh) is that shell.
func ShellScriptFile(name string, argv []string) ([]string, bool) {
	if len(argv) < 2 {
		return nil, false
	}
	named := append([]string{name}, argv[1:]...)
	if prog, ok := applet(named); ok {
		return shellScriptFile(prog)
	}
	return shellScriptFile(named)
}

// ShellStartupFiles returns the files a shell started with argv (by the
// name name, as ShellScriptFile) sources before anything else: the values
// of bash's --rcfile and --init-file. Each runs as its script does, and
// no exec of it is seen.
func ShellStartupFiles(name string, argv []string) []string {
	if len(argv) < 2 {
		return nil
	}
	named := append([]string{name}, argv[1:]...)
	if prog, ok := applet(named); ok {
		return shellStartupFiles(prog)
	}
	return shellStartupFiles(named)
}

// DecideExecFrom decides argv, a program started from the directory dir,
// with its relative arguments read from there: what a deny or an ask is
// about by absolute path holds for the same path reached from elsewhere.
// The policy's own rules decide so from any directory; the built-in
// delete-outside only from one where a deletion can reach what outlives
// the sandbox (cd /data && rm -rf sub, /data a read_write path; not a
// build's rm -f conftest.o under the sandbox's own /tmp). An unknown dir
// ("", a working directory too long to read) counts as outside
// everything. Allow when nothing denies or asks.
func (rs *Rules) DecideExecFrom(argv []string, dir string) Decision {
	if len(argv) < 2 {
		return Decision{Verdict: Allow}
	}
	if !strings.HasPrefix(dir, "/") {
		dir = unknownDir
	}
	abs := slices.Clone(argv)
	changed, opts := false, true
	for i, w := range argv[1:] {
		if opts && w == "--" {
			opts = false
			continue
		}
		if w == "" || opts && strings.HasPrefix(w, "-") || strings.HasPrefix(w, "/") {
			continue
		}
		abs[i+1], changed = path.Join(dir, w), true
	}
	if !changed {
		return Decision{Verdict: Allow}
	}
	c := simple{argv: abs}
	if _, ok := strongest(rs.policy, argv, nil); ok {
		// The policy decided the words as written (an allow of rm -rf
		// ../build): its decision stands, and no built-in overrides it.
		if pd, ok := strongest(rs.policy, abs, nil); ok && pd.Verdict != Allow {
			return pd
		}
		return Decision{Verdict: Allow}
	}
	if pd, ok := strongest(rs.policy, abs, nil); ok {
		if pd.Verdict != Allow {
			return pd
		}
		return Decision{Verdict: Allow}
	}
	if dir != unknownDir && !rs.scratch.reaches(dir) {
		return Decision{Verdict: Allow}
	}
	if d := rs.decideWords(c); d.Verdict != Allow {
		return d
	}
	return Decision{Verdict: Allow}
}

// unknownDir stands for a working directory that could not be read: no
// path of the workspace, nor of a read_write one.
const unknownDir = "/.moat-unknown-directory"

func (rs *Rules) decideExec(path string, argv []string, depth int) Decision {
	if len(argv) == 0 {
		if path == "" {
			return Decision{Verdict: Allow}
		}
		argv = []string{path}
	}
	d := rs.decideOne(simple{argv: argv})
	d = rs.decideLoaded(path, argv, d, depth)
	if prog, ok := applet(argv); ok && depth <= maxDepth {
		// A multi-call binary runs its applet in its own process: no
		// exec of the applet's is seen, so it is decided here.
		if da := rs.decideExec(prog[0], prog, depth+1); runsWins(d, da) {
			d = da
		}
	}
	if path == "" || baseName(path) == baseName(argv[0]) {
		return d
	}
	alt := append([]string{path}, argv[1:]...)
	da := rs.decideOne(simple{argv: alt})
	if multiCall(baseName(path)) {
		// A multi-call binary runs the applet argv[0] names: the name
		// it was called by is what runs, and wins a tie (exec -a nc
		// busybox asked as busybox let nc run on a grant for busybox,
		// found by a tester).
		if da.Verdict.rank() > d.Verdict.rank() {
			d = da
		}
		return d
	}
	if runsWins(d, da) {
		d = da
	}
	return d
}

// runsWins says whether ran, the decision about the program that runs
// (the file an exec names, the applet a multi-call binary runs, what a
// loader maps), wins over called, the decision about the name it was
// called by: when it is stronger, and on a tie short of an allow too.
// A person asked about the name (execve("/usr/bin/git", ["uname", "-a"])
// asked as uname) gave a grant that later let git push run, asked about
// as uname again (found by a tester): the question names what runs.
func runsWins(called, ran Decision) bool {
	return ran.Verdict.rank() > called.Verdict.rank() || ran.Verdict != Allow && ran.Verdict.rank() == called.Verdict.rank()
}

// decideLoaded decides, when argv (started as path) is the dynamic
// loader's, the program the loader runs: the loader maps it itself, so
// its start is no exec of its own. The stronger decision wins.
func (rs *Rules) decideLoaded(path string, argv []string, d Decision, depth int) Decision {
	if !isLoader(baseName(path)) && !isLoader(baseName(argv[0])) || depth > maxDepth {
		return d
	}
	prog, argv0, ok := Loaded(argv)
	if !ok {
		return d
	}
	// --argv0 names the program to itself: decided under both names.
	args := prog
	if argv0 != "" {
		args = append([]string{argv0}, prog[1:]...)
	}
	if dl := rs.decideExec(prog[0], args, depth+1); runsWins(d, dl) {
		return dl
	}
	return d
}

// Loaded returns, for argv of the dynamic loader (ld.so, ld-linux*.so*,
// ld-musl-*), the program it runs and its arguments, past the loader's
// options, and the argv[0] --argv0 gives it ("" for none); false when
// there is none (the loader alone, --help).
func Loaded(argv []string) (prog []string, argv0 string, ok bool) {
	i := 1
	for i < len(argv) {
		a := argv[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		i++
		if slices.Contains(loaderArgs, a) {
			if a == "--argv0" && i < len(argv) {
				argv0 = argv[i]
			}
			i++
		}
	}
	if i >= len(argv) {
		return nil, "", false
	}
	return argv[i:], argv0, true
}

// LoaderPreloads returns the options of the dynamic loader's command
// line argv (see Loaded) that load code of the caller's choosing into
// the program it runs, each with its value: --preload, --audit and
// --library-path, as DecidePreload decides them.
func LoaderPreloads(argv []string) []string {
	var out []string
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		if !slices.Contains(loaderArgs, a) {
			continue
		}
		if i+1 < len(argv) && (a == "--preload" || a == "--audit" || a == "--library-path") {
			out = append(out, a+" "+argv[i+1])
		}
		i++
	}
	return out
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
