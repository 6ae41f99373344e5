package harness

import (
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"mvdan.cc/sh/v3/syntax"
)

// simple is one simple command of a command line.
type simple struct {
	argv []string
	// hidden says why what this command runs cannot be seen from the
	// line; "" when it can.
	hidden string
}

// word is one word of a command, as the shell will see it before
// expansion: dyn is set when its value is only known when the line runs
// ($VAR, $(…), arithmetic), and s is then its source text.
type word struct {
	s   string
	dyn bool
	// tmpl is, for a dyn word, its value with the expansions as written
	// and the quotes removed ("" when escapes make it unsure): the text
	// a later evaluation of the value reads as a line (a trap's action,
	// PROMPT_COMMAND), see wordOf.
	tmpl string
}

// maxDepth bounds how deep shells and wrappers are followed; deeper
// nesting counts as hiding what runs.
const maxDepth = 16

// isShell reports whether the program name runs its -c argument as a
// script. The programs are a switch and wrappers a slice, not maps: a
// package-level map is built at the start of every moat process, this
// package being linked into every one.
func isShell(name string) bool {
	switch name {
	case "sh", "bash", "rbash", "zsh", "dash", "ksh", "mksh", "lksh", "pdksh", "oksh", "ash", "posh", "yash",
		"busybox-sh", "busybox-bash", "fish", "csh", "tcsh":
		return true
	}
	return false
}

// wrappers run the command that follows their options. args lists the
// options that take a separate argument.
var wrappers = []struct {
	name string
	args []string
}{
	{"env", []string{"-u", "--unset", "-C", "--chdir"}},
	{"sudo", []string{"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group", "--chdir"}},
	{"doas", []string{"-u", "-C"}},
	{"nice", []string{"-n", "--adjustment"}},
	{"nohup", nil},
	{"setsid", nil},
	{"time", []string{"-f", "-o", "--format", "--output"}},
	{"timeout", []string{"-s", "-k", "--signal", "--kill-after"}},
	{"stdbuf", []string{"-i", "-o", "-e", "--input", "--output", "--error"}},
	{"ionice", []string{"-c", "-n", "--class", "--classdata"}},
	{"xargs", []string{"-I", "-n", "-P", "-d", "-L", "-s", "-a", "-E", "--max-args", "--max-procs", "--delimiter", "--max-lines", "--max-chars", "--arg-file"}},
	{"command", nil},
	{"builtin", nil},
	{"exec", []string{"-a"}},
}

// loaderArgs are the options of the dynamic loader (glibc's ld.so, musl's
// ld-musl) that take a separate argument.
var loaderArgs = []string{"--argv0", "--library-path", "--preload", "--audit", "--inhibit-rpath", "--glibc-hwcaps-prepend", "--glibc-hwcaps-mask"}

// IsLoader reports whether name (a base name) is the dynamic loader's,
// which runs the program its first operand names
// (/lib64/ld-linux-x86-64.so.2 /usr/bin/git push) by mapping it itself,
// with no exec of its own to check.
func IsLoader(name string) bool { return isLoader(name) }

func isLoader(name string) bool {
	switch {
	case name == "ld.so", strings.HasPrefix(name, "ld-musl-"):
		return true
	case strings.HasPrefix(name, "ld-linux") || strings.HasPrefix(name, "ld64.so"):
		return strings.Contains(name, ".so")
	}
	return false
}

// multiCall reports whether name (a base name) is a multi-call binary's
// own, run as which it takes its first operand as the applet to run, in
// its own process: busybox takes every name that begins with "busybox"
// as its own.
func multiCall(name string) bool {
	return strings.HasPrefix(name, "busybox") || strings.HasPrefix(name, "toybox")
}

// applet returns, for argv of a multi-call binary run under its own
// name, the applet it runs and its arguments (the applet may be named
// by a path: busybox runs /usr/bin/wget as wget); false for the binary
// alone or one of its own options (--list, --install).
func applet(argv []string) ([]string, bool) {
	if len(argv) < 2 || !multiCall(baseName(argv[0])) || strings.HasPrefix(argv[1], "-") {
		return nil, false
	}
	return argv[1:], true
}

// wrapper returns the options of the wrapper name that take a separate
// argument; false if name is not a wrapper.
func wrapper(name string) (withArg []string, ok bool) {
	if isLoader(name) {
		return loaderArgs, true
	}
	for _, w := range wrappers {
		if w.name == name {
			return w.args, true
		}
	}
	return nil, false
}

// split returns the simple commands argv runs, as far as the line shows.
func split(argv []string) []simple {
	ws := make([]word, len(argv))
	for i, a := range argv {
		ws[i] = word{s: a}
	}
	s := splitter{parsed: new(int)}
	s.command(ws, 0, false)
	return s.out
}

type splitter struct {
	out []simple
	// parsed counts the bytes of shell script parsed for one line,
	// nested shells' and every language's included: a line nesting sh -c
	// in sh -c has each level parsed again, twice for sh (bash and POSIX),
	// which made a megabyte line hours of work. Past maxParsed the line
	// counts as hiding what it runs.
	parsed *int
}

// maxParsed bounds the script a line's parse reads in all (see
// splitter.parsed): a few times the largest line an API request holds.
const maxParsed = 8 << 20

func texts(ws []word) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.s
	}
	return out
}

func (s *splitter) add(ws []word, hidden string) {
	s.out = append(s.out, simple{argv: texts(ws), hidden: hidden})
}

// command records the simple command ws and what it runs in turn.
// inScript is set for commands read from a shell script, whose standard
// input may be a pipe or a here-document.
func (s *splitter) command(ws []word, depth int, inScript bool) {
	if len(ws) == 0 {
		return
	}
	if depth > maxDepth {
		s.add(ws, "commands are nested too deeply to follow")
		return
	}
	if ws[0].dyn {
		s.add(ws, "the program's name is only known when the line runs ("+shownWord(ws[0].s)+")")
		return
	}
	if inScript && isPattern(ws[0].s) {
		s.add(ws, "the program's name is a pattern the shell expands ("+shownWord(ws[0].s)+")")
		return
	}
	name := path.Base(ws[0].s)
	switch {
	case name == "eval":
		s.add(ws, "eval runs a string as a command line")
	case name == "read" || name == "printf" || name == "mapfile" || name == "readarray":
		// They assign a variable they name: one that decides what a
		// later program runs (read BASH_ENV, printf -v
		// GIT_CONFIG_PARAMETERS ...) gets a value the line does not show.
		s.add(ws, "")
		for _, w := range ws[1:] {
			v := w.s
			if name == "printf" && strings.HasPrefix(v, "-v") && len(v) > 2 {
				v = v[2:] // printf -vBASH_ENV
			}
			if !w.dyn && laterRunVar(v) {
				s.add(ws, "it sets "+v+", which decides what later programs run, to a value the line does not show")
				break
			}
		}
	case (ws[0].s == "." || ws[0].s == "source") && len(ws) > 1:
		// The POSIX spelling of bash's source: one rule decides both.
		// The file sourced runs as a script run would, so it is decided
		// as the program it is too (a deny of deploy.sh holds for
		// source deploy.sh, and source -- deploy.sh); a name computed
		// when the line runs is left to the rules about source, as a
		// program it would only ask, but a pattern the shell expands
		// (. ./deploy.s[h]) hides which file it is.
		s.add(append([]word{{s: "source"}}, ws[1:]...), "")
		file := ws[1:]
		if file[0].s == "--" && !file[0].dyn {
			file = file[1:]
		}
		switch {
		case len(file) > 0 && file[0].dyn && (strings.Contains(file[0].s, "<(") || strings.Contains(file[0].s, ">(")):
			// source <(cat deploy.sh): a descriptor's script.
			s.add(file, "the sourced file is a process substitution's descriptor ("+shownWord(file[0].s)+"), whose script the line does not show")
		case len(file) == 0:
		case inScript && isPattern(file[0].s):
			// Also one only known when the line runs: . $D/*.sh, and an
			// extended pattern, which the parser reads as an expansion.
			s.add(file, "the sourced file's name is a pattern the shell expands ("+shownWord(file[0].s)+")")
		case file[0].dyn:
			// Left to the rules about source, as a program it would only
			// ask; but one whose fixed part is a descriptor's
			// (. /dev/fd/$fd) hides its script as a fixed one does.
			if DescriptorPath(file[0].s) {
				s.add(file, "the sourced file is a descriptor's or a device's ("+shownWord(file[0].s)+"), whose script the line does not show")
			}
		default:
			s.sourced(file)
		}
	case name == "trap" && len(ws) > 1:
		// trap ACTION SIGNAL...: ACTION is a line the shell runs later;
		// its programs are checked as they start, but a source in it,
		// like one on the line, starts none.
		s.add(ws, "")
		act := ws[1:]
		if act[0].s == "--" && !act[0].dyn && len(act) > 1 {
			act = act[1:]
		}
		switch a := act[0]; {
		case len(act) < 2:
		case a.dyn && a.tmpl != "":
			// trap "rm -f $tmp" EXIT: read as the line it is, its
			// variables left as they are (a program named by one is
			// asked about, as on any line).
			s.script(a.tmpl, depth+1, shellLangs("bash"))
		case a.dyn:
			s.add(ws, "a trap runs a line only known when the line runs ("+shownWord(a.s)+")")
		case a.s != "-" && a.s != "" && !strings.HasPrefix(a.s, "-"):
			s.script(a.s, depth+1, shellLangs("bash"))
		}
	case isShell(name):
		s.shell(ws, depth, inScript)
	case multiCall(name) && len(ws) > 1 && !strings.HasPrefix(ws[1].s, "-"):
		// busybox wget: the applet is decided as a command of its own
		// (busybox sh -c '...' is a shell's line).
		s.add(ws, "")
		s.command(ws[1:], depth+1, inScript)
	case isWrapper(name):
		s.add(ws, "")
		s.wrapped(name, ws[1:], depth)
	case name == "find":
		s.add(ws, "")
		s.findExec(ws[1:], depth, inScript)
	default:
		s.add(ws, "")
	}
}

// findExec follows the commands find runs: each -exec, -execdir, -ok or
// -okdir takes the words up to ";" or "+" as a command line of its own
// ({} stands for the file found).
func (s *splitter) findExec(args []word, depth int, inScript bool) {
	for i := 0; i < len(args); i++ {
		switch args[i].s {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		j := i + 1
		for j < len(args) && args[j].s != ";" && args[j].s != "+" {
			j++
		}
		s.command(args[i+1:j], depth+1, inScript)
		i = j
	}
}

// isPattern reports whether the shell would expand word as a glob or a
// brace expansion: "[" alone is the test program, not a pattern.
func isPattern(w string) bool {
	if strings.ContainsAny(w, "*?") {
		return true
	}
	if i := strings.IndexByte(w, '['); i >= 0 && strings.IndexByte(w[i+1:], ']') >= 0 {
		return true
	}
	if i := strings.IndexByte(w, '{'); i >= 0 && (strings.Contains(w[i+1:], ",") || strings.Contains(w[i+1:], "..")) && strings.IndexByte(w[i+1:], '}') >= 0 {
		return true // {a,b} and the range {a..z}
	}
	// bash's extended patterns (shopt -s extglob): @(a|b), +(a), !(a);
	// ?(a) and *(a) are caught above.
	for _, op := range []string{"@(", "+(", "!("} {
		if i := strings.Index(w, op); i >= 0 && strings.IndexByte(w[i+2:], ')') >= 0 {
			return true
		}
	}
	return false
}

func isWrapper(name string) bool { _, ok := wrapper(name); return ok }

// takesNext reports whether the option word a, among options withArg
// that take a value, takes the next word for it: a itself is one of
// them, or a is a group of short options (env -iu X) whose last one is,
// a short option's value being the rest of its group otherwise.
func takesNext(a string, withArg []string) bool {
	if slices.Contains(withArg, a) {
		return true
	}
	if strings.HasPrefix(a, "--") || len(a) < 3 {
		return false
	}
	for j := 1; j < len(a); j++ {
		if slices.Contains(withArg, "-"+a[j:j+1]) {
			return j == len(a)-1
		}
	}
	return false
}

// wrapped follows the command a wrapper runs.
func (s *splitter) wrapped(name string, args []word, depth int) {
	withArg, _ := wrapper(name)
	i := 0
	for i < len(args) {
		a := args[i].s
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		short := !strings.HasPrefix(a, "--")
		if name == "env" && (short && strings.ContainsRune(a, 'S') || strings.HasPrefix(a, "--split-string")) {
			s.add(args, "env -S splits a string into a command line")
			return
		}
		if name == "command" && (a == "-v" || a == "-V") {
			return // a query, runs nothing
		}
		i++
		if takesNext(a, withArg) {
			i++
		}
	}
	switch name {
	case "env":
		for i < len(args) {
			a := args[i]
			if !a.dyn && strings.Contains(a.s, "=") && !strings.HasPrefix(a.s, "=") {
				s.startupFile(a.s)
				i++
				continue
			}
			// env HOME=$HOME cmd, env "PATH=$HOME/bin:$PATH" cmd: an
			// assignment whose name is written out, its value computed.
			name, value, ok := strings.Cut(strings.TrimLeft(a.s, `"'`), "=")
			if !a.dyn || !ok || !isName(name) {
				break
			}
			s.assignment(name, word{s: value, dyn: true})
			i++
		}
	case "timeout":
		i++ // the duration
	}
	if i < len(args) {
		s.command(args[i:], depth+1, false)
	}
}

// shell follows what a shell runs: the script of -c, parsed; a script
// file is not read (it is a program like any other); a shell with no
// script reads it from its input, which inside a script is a pipe or a
// here-document this check cannot see.
func (s *splitter) shell(ws []word, depth int, inScript bool) {
	s.add(ws, "")
	op, c := shellOperand(texts(ws[1:]))
	// bash --rcfile FILE (--init-file) sources FILE first, as BASH_ENV
	// does: decided as source FILE and as the program it is.
	for _, i := range startupFileArgs(texts(ws)) {
		if f := ws[i]; f.dyn {
			s.add(ws, "the shell's startup file is only known when the line runs ("+shownWord(f.s)+")")
		} else {
			s.add([]word{{s: "source"}, f}, "")
			s.sourced([]word{f})
		}
	}
	switch {
	case op < 0:
		if inScript {
			s.add(ws, "a shell reads its script from its input (a pipe or a here-document)")
		}
	case !c:
		// A script file: a program like any other, not read here, and
		// decided as one (a rule about deploy.sh decides sh deploy.sh).
		s.command(ws[1+op:], depth+1, inScript)
	case ws[1+op].dyn:
		s.add(ws, "a shell runs a script only known when the line runs ("+shownWord(ws[1+op].s)+")")
	default:
		s.script(ws[1+op].s, depth+1, shellLangs(path.Base(ws[0].s)))
	}
}

// shellOperand finds, in the arguments of a shell, its first operand (the
// script file, or with c the -c script), or -1.
func shellOperand(args []string) (op int, c bool) {
	// -s: the script is the shell's input, its operands the script's
	// arguments; unless -c, which wins (bash -s -c 'git push' runs it).
	stdin := false
	found := func(i int) (int, bool) {
		if stdin && !c {
			return -1, false
		}
		return i, c
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" {
			if i+1 < len(args) {
				return found(i + 1)
			}
			return -1, c
		}
		if !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "+") {
			return found(i)
		}
		if strings.HasPrefix(a, "--") {
			if a == "--rcfile" || a == "--init-file" {
				i++
			}
			continue
		}
		if strings.ContainsRune(a[1:], 'c') {
			c = true
		}
		if strings.ContainsRune(a[1:], 's') {
			stdin = true
		}
		if strings.ContainsAny(a[1:], "oO") {
			i++ // -o OPTION
		}
	}
	return -1, c
}

// shellStartupFiles returns the files a shell started with argv sources
// before its script: the values of bash's --rcfile and --init-file.
func shellStartupFiles(argv []string) []string {
	if len(argv) < 2 || !isShell(strings.TrimPrefix(path.Base(argv[0]), "-")) {
		return nil
	}
	var files []string
	for _, i := range startupFileArgs(argv) {
		files = append(files, argv[i])
	}
	return files
}

// startupFileArgs returns the indices in argv, a shell's, of the values
// of its --rcfile and --init-file options, before its operand.
func startupFileArgs(argv []string) []int {
	op, _ := shellOperand(argv[1:])
	end := len(argv)
	if op >= 0 {
		end = 1 + op
	}
	var at []int
	for i := 1; i+1 < end; i++ {
		if a := argv[i]; a == "--rcfile" || a == "--init-file" {
			at = append(at, i+1)
			i++
		}
	}
	return at
}

// shellScriptFile returns, for a shell started on a script file (sh
// deploy.sh, not sh -c), the file and its arguments: the program that
// really runs, which no exec shows.
func shellScriptFile(argv []string) ([]string, bool) {
	// A login shell's argv[0] is its name after a dash (-sh), which
	// busybox's shell takes as sh, too.
	if len(argv) < 2 || !isShell(strings.TrimPrefix(path.Base(argv[0]), "-")) {
		return nil, false
	}
	op, c := shellOperand(argv[1:])
	if op < 0 || c {
		return nil, false
	}
	return argv[1+op:], true
}

// script parses a shell script in each of the languages langs and
// records every simple command each reads in it: where two languages read
// a line differently (sh is bash or dash), what either would run is
// decided; what a later language reads as an earlier one did is not
// listed again. A script that a language does not parse (dash runs what
// comes before the error), that nests too deeply, or past the line's
// budget of parsing, counts as hiding what it runs.
func (s *splitter) script(src string, depth int, langs []syntax.LangVariant) {
	if len(langs) == 0 {
		s.out = append(s.out, simple{argv: []string{src}, hidden: "the shell's language is not one moat reads"})
		return
	}
	if *s.parsed += len(src) * len(langs); *s.parsed > maxParsed {
		s.out = append(s.out, simple{argv: []string{src}, hidden: "the shell line holds more script than moat reads (nested shells read it again)"})
		return
	}
	var all []simple
	for i, lang := range langs {
		f, err, deep := parseBounded(src, lang)
		if err != nil {
			s.out = append(s.out, simple{argv: []string{src}, hidden: "the shell line cannot be parsed" + langName(lang, len(langs)) + ": " + err.Error()})
			return
		}
		sub := splitter{parsed: s.parsed}
		if deep || !sub.walk(f, src, depth) {
			s.out = append(s.out, simple{argv: []string{src}, hidden: tooNestedWhy()})
			return
		}
		if i == 0 {
			all = sub.out
		} else {
			all = append(all, missing(all, sub.out)...)
		}
	}
	s.out = append(s.out, all...)
}

// langName names lang in an error, where a line is read in n languages.
func langName(lang syntax.LangVariant, n int) string {
	if n < 2 {
		return ""
	}
	return " as " + lang.String()
}

// walk records the simple commands of f, parsed from src; false when its
// tree is deeper than maxWalkDepth. syntax.Walk descends once for each
// level of the tree, which a chain makes as deep as it is long however the
// parser built it.
func (s *splitter) walk(f *syntax.File, src string, depth int) bool {
	level, ok := 0, true
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			level--
			return true
		}
		if !ok || level >= maxWalkDepth {
			ok = false
			return false
		}
		level++
		if as, isAssign := n.(*syntax.Assign); isAssign && as.Array != nil && as.Name != nil && laterRunVar(as.Name.Value) {
			// PS4=('$(...)'): the first element is the variable's value.
			s.out = append(s.out, simple{argv: []string{as.Name.Value + "=(...)"}, hidden: "it sets " + as.Name.Value + ", which decides what later programs run, to an array the check does not read"})
		}
		if dc, isDecl := n.(*syntax.DeclClause); isDecl {
			s.nameref(dc, src)
		}
		if as, isAssign := n.(*syntax.Assign); isAssign && as.Value != nil {
			v := wordOf(src, as.Value)
			switch {
			case as.Name != nil:
				s.assignment(as.Name.Value, v)
			case as.Naked:
				// export "NAME=VALUE", declare -x "$X": the name is in
				// the word, where a value computed when the line runs
				// may follow it ("PATH=$PATH:/x"), but not stand for it.
				text := v.s
				if v.dyn {
					text = strings.TrimLeft(text, `"'`)
				}
				name, value, ok := strings.Cut(text, "=")
				switch {
				case ok && isName(name):
					s.assignment(name, word{s: value, dyn: v.dyn})
				case v.dyn:
					s.out = append(s.out, simple{argv: []string{v.s}, hidden: "a variable is named when the line runs (" + shownWord(v.s) + ")"})
				}
			}
		}
		if pe, isParam := n.(*syntax.ParamExp); isParam && pe.Param != nil && pe.Exp != nil &&
			(pe.Exp.Op == syntax.AssignUnset || pe.Exp.Op == syntax.AssignUnsetOrNull) {
			// ${BASH_ENV:=deploy.sh} assigns as BASH_ENV=deploy.sh does.
			name := pe.Param.Value
			switch {
			case pe.Exp.Word == nil:
				s.assignment(name, word{})
			default:
				s.assignment(name, wordOf(src, pe.Exp.Word))
			}
		}
		if call, isCall := n.(*syntax.CallExpr); isCall && len(call.Args) > 0 {
			ws := make([]word, len(call.Args))
			for i, w := range call.Args {
				ws[i] = wordOf(src, w)
			}
			s.command(ws, depth, true)
		}
		return true // the words' own $(…) are commands too
	})
	return ok
}

// startupFile records, for an assignment NAME=VALUE of the variable a
// shell sources a file by (BASH_ENV for bash's scripts, ENV for sh's),
// that file as sourced: env BASH_ENV=./x bash -c true runs x as
// source ./x does.
//
// An assignment of git's configuration through the environment is
// recorded as the git -c it stands for, so that the rules about git's own
// options decide it (GIT_CONFIG_PARAMETERS="'help.autocorrect'=
// 'immediate'" git psuh runs push inside git's own process, as git -c
// help.autocorrect=immediate psuh does).
func (s *splitter) startupFile(assign string) {
	name, value, _ := strings.Cut(assign, "=")
	s.assignment(name, word{s: value})
}

// sourced records the file of a source (and its arguments) as the
// program it is; a file that is a descriptor's or a device's
// (/dev/stdin, /dev/fd/3, /proc/self/fd/0) holds a script the line does
// not show, whatever the descriptor was opened on (exec 3<deploy.sh;
// . /dev/fd/3), and counts as hiding what runs.
func (s *splitter) sourced(file []word) {
	if DescriptorPath(file[0].s) {
		s.add(file, "the sourced file is a descriptor's or a device's ("+shownWord(file[0].s)+"), whose script the line does not show")
		return
	}
	s.add(file, "")
}

// DescriptorPath reports whether a file sourced by the name f is a
// descriptor's or a device's (/dev/stdin, /dev/fd/3, /proc/self/fd/0, and
// the same reached up from a relative name: ../../dev/stdin), whose
// script no name shows. /dev/null is none. f may end in a part known only
// when the line runs (/dev/fd/$fd): its fixed start decides.
func DescriptorPath(f string) bool {
	f = path.Clean(strings.TrimLeft(f, `"'`))
	if f == "/dev/null" {
		return false
	}
	return strings.HasPrefix(f, "/dev/") || strings.HasPrefix(f, "/proc/") ||
		strings.HasPrefix(f, "../") && (strings.Contains(f, "/dev/") || strings.Contains(f, "/proc/"))
}

// shownWord is a word of the line as a reason quotes it: quoted, with
// escapes, when it holds a control or bidirectional formatting character,
// so that the reason a terminal shows cannot clear or redraw the screen
// around it.
func shownWord(w string) string {
	if strings.IndexFunc(w, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }) >= 0 {
		return strconv.Quote(w)
	}
	return w
}

// isName reports whether s is a shell variable's name.
func isName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// nameref records a declaration of references (declare -n, local -n,
// nameref) to a variable whose value decides what later programs run:
// assignment leaves ENV and GIT_CONFIG_COUNT out of its references,
// words other values hold (MODE=ENV), which -n makes references.
func (s *splitter) nameref(dc *syntax.DeclClause, src string) {
	ref := dc.Variant != nil && dc.Variant.Value == "nameref"
	for _, a := range dc.Args {
		if a.Naked && a.Name == nil && a.Value != nil {
			if f := wordOf(src, a.Value); !f.dyn && strings.HasPrefix(f.s, "-") && !strings.HasPrefix(f.s, "--") && strings.ContainsRune(f.s, 'n') {
				ref = true
			}
		}
	}
	if !ref {
		return
	}
	for _, a := range dc.Args {
		if a.Name == nil || a.Value == nil {
			continue
		}
		if v := wordOf(src, a.Value); !v.dyn && laterRunVar(v.s) {
			s.out = append(s.out, simple{argv: []string{a.Name.Value + "=" + v.s}, hidden: "a reference to " + shownWord(v.s) + ", whose value decides what later programs run"})
		} else if v.dyn {
			s.out = append(s.out, simple{argv: []string{a.Name.Value + "=" + v.s}, hidden: "a reference to a variable named when the line runs (" + shownWord(v.s) + ")"})
		}
	}
}

// laterRunVar reports whether name is a startupVar, or a variable whose
// value bash runs as commands later: a prompt (its command
// substitutions, PS4 at each line of set -x) or PROMPT_COMMAND.
func laterRunVar(name string) bool {
	switch name {
	case "PS0", "PS1", "PS2", "PS4", "PROMPT_COMMAND":
		return true
	}
	return startupVar(name)
}

// startupVar reports whether name is a variable whose value decides what
// a later program runs (see startupFile): BASH_ENV, ENV, and git's
// configuration in the environment.
func startupVar(name string) bool {
	return name == "BASH_ENV" || name == "ENV" || name == "GIT_CONFIG_PARAMETERS" || name == "GIT_CONFIG_COUNT" || strings.HasPrefix(name, "GIT_CONFIG_KEY_")
}

// assignment records what the assignment of v to the variable name
// runs, as startupFile says; a value known only when the line runs (a
// $VAR in it, escapes that spell it) of such a variable, and a reference
// (declare -n) to one, count as hiding what runs.
func (s *splitter) assignment(name string, v word) {
	value := v.s
	// A reference (declare -n r=NAME; r=...) names the variable in its
	// value; ENV and GIT_CONFIG_COUNT are left out, words a value holds
	// for other reasons (MODE=ENV), and neither does anything alone.
	if startupVar(value) && value != "ENV" && value != "GIT_CONFIG_COUNT" {
		s.out = append(s.out, simple{argv: []string{name + "=" + value}, hidden: "a reference to " + shownWord(value) + ", whose value decides what later programs run"})
		return
	}
	if v.dyn && name == "GIT_CONFIG_PARAMETERS" {
		// What it held, with settings added to it: read as those.
		t := strings.NewReplacer("${GIT_CONFIG_PARAMETERS}", "", "$GIT_CONFIG_PARAMETERS", "", `"`, "").Replace(value)
		if !strings.ContainsAny(t, "$`\\") {
			v, value = word{s: t}, t
		}
	}
	if v.dyn && startupVar(name) {
		s.out = append(s.out, simple{argv: []string{name + "=" + value}, hidden: "the value of " + name + ", which decides what later programs run, is only known when the line runs"})
		return
	}
	switch {
	case name == "PROMPT_COMMAND" && value != "":
		// A line bash runs before each prompt of an interactive shell.
		switch {
		case !v.dyn:
			s.script(value, 1, shellLangs("bash"))
		case v.tmpl != "":
			// What it held, with a line added to it: read as that line.
			s.script(strings.NewReplacer("${PROMPT_COMMAND}", "", "$PROMPT_COMMAND", "").Replace(v.tmpl), 1, shellLangs("bash"))
		default:
			s.out = append(s.out, simple{argv: []string{name + "=" + value}, hidden: "the value of " + name + ", a line bash runs at each prompt, is only known when the line runs"})
		}
	case (name == "PS0" || name == "PS1" || name == "PS2" || name == "PS4") && (strings.Contains(value, "$(") || strings.Contains(value, "`")):
		// Expanded as it is shown (PS4 at each line of set -x): its
		// command substitutions run then.
		s.out = append(s.out, simple{argv: []string{name + "=" + value}, hidden: "it sets " + name + " to run commands when the shell shows it, a script this check does not read"})
	case (name == "BASH_ENV" || name == "ENV") && value != "":
		// As the source of the file it names: decided as source FILE,
		// and as the program the file is (a rule about deploy.sh decides
		// BASH_ENV=deploy.sh bash -c true, as it does source deploy.sh).
		s.out = append(s.out, simple{argv: []string{"source", value}})
		s.sourced([]word{{s: value}})
	case strings.HasPrefix(name, "BASH_FUNC_"):
		// env 'BASH_FUNC_f%%=() { ...; }' bash: a function every bash it
		// starts defines, whose body is a script the line does not read.
		s.out = append(s.out, simple{argv: []string{name + "=" + value}, hidden: "it defines a shell function (" + shownWord(name) + ") for the shells it starts, a script this check does not read"})
	case name == "GIT_CONFIG_PARAMETERS":
		// 'key'='value' pairs, shell-quoted, separated by spaces.
		for _, kv := range strings.Fields(strings.ReplaceAll(value, "'", "")) {
			s.out = append(s.out, simple{argv: []string{"git", "-c", kv}})
		}
	case strings.HasPrefix(name, "GIT_CONFIG_KEY_"):
		s.out = append(s.out, simple{argv: []string{"git", "-c", value + "="}})
	}
}

// missing returns the commands of b that a does not hold. Leaving one
// out is cosmetic (the decision is the strongest of all): when the words
// are too long to compare cheaply, b is returned whole.
func missing(a, b []simple) []simple {
	size := 0
	for _, l := range [][]simple{a, b} {
		for _, c := range l {
			for _, w := range c.argv {
				size += len(w)
			}
		}
	}
	if size > 1<<20 {
		return b
	}
	key := func(c simple) string { return c.hidden + "\x00" + strings.Join(c.argv, "\x00") }
	have := map[string]int{}
	for _, c := range a {
		have[key(c)]++
	}
	var out []simple
	for _, c := range b {
		if k := key(c); have[k] > 0 {
			have[k]--
		} else {
			out = append(out, c)
		}
	}
	return out
}

// wordOf returns a word's value after quote removal, or its source text
// (from src, the line it was parsed from) when part of it is only known
// when the line runs: sliced from the line as written, so the word is
// shown exactly as the agent sent it.
func wordOf(src string, w *syntax.Word) word {
	// text is the source of n as written, "" with false when n's
	// positions are not in src.
	text := func(n syntax.Node) (string, bool) {
		from, to := int(n.Pos().Offset()), int(n.End().Offset())
		if from < 0 || to > len(src) || from > to {
			return "", false
		}
		return src[from:to], true
	}
	// b is the value, known while dyn is false; t is the template (see
	// word.tmpl): the literal parts as b has them, each expansion as
	// written. sure is false once escapes spell part of the value.
	var b, t strings.Builder
	dyn, sure := false, true
	expansion := func(n syntax.Node) {
		dyn = true
		if x, ok := text(n); ok {
			t.WriteString(x)
		} else {
			sure = false
		}
	}
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := unescape(p.Value, false)
			b.WriteString(v)
			t.WriteString(v)
		case *syntax.SglQuoted:
			if p.Dollar && strings.Contains(p.Value, `\`) {
				dyn, sure = true, false // $'\x67it': escapes spell the value
			}
			b.WriteString(p.Value)
			t.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if l, ok := q.(*syntax.Lit); ok {
					v := unescape(l.Value, true)
					b.WriteString(v)
					t.WriteString(v)
				} else {
					expansion(q)
				}
			}
		default:
			expansion(part)
		}
	}
	if !dyn {
		return word{s: b.String()}
	}
	out := word{s: b.String(), dyn: true}
	if sure {
		// trap "echo $u"' x; . ./f' EXIT sets the action echo $u x;
		// . ./f, which the shell reads as a line when the trap runs;
		// what a variable's value adds to that line is not known here.
		out.tmpl = t.String()
	}
	if x, ok := text(w); ok {
		out.s = x
	}
	return out
}

// unescape removes the backslashes the shell removes: before any
// character outside quotes, before $ ` " \ and newline inside double
// quotes. A backslash-newline joins lines.
func unescape(s string, dquoted bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (!dquoted || strings.IndexByte("$`\"\\\n", s[i+1]) >= 0) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
