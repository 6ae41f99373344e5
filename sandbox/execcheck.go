package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/internal/lookpath"
	"github.com/moatbox/moat/internal/pathwalk"
	"github.com/moatbox/moat/internal/shebang"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/workspace"
)

// LayerRules is the Denial.Layer of a program the command rules refused
// to start inside the sandbox.
const LayerRules = "rules"

// ReasonArgvTooLong is the reason of a refused exec whose argv is longer
// than the exec check reads (backend.ExecCall.Truncated), so that the
// rules could not see all of it.
const ReasonArgvTooLong = "the argv is too long to check"

// ReasonUnreadable is the reason of a refused exec whose file moat may
// not read: the kernel reads a script's #! line whatever the file's read
// bits, so what such a file runs could not be checked.
const ReasonUnreadable = "the program's file cannot be read to check what it runs"

// execCheck answers the backend's CheckExec for one run: each program a
// process of the sandbox starts is checked against the command rules
// (harness.Rules.DecideExec), so that a rule holds for what make or a
// script runs, not only for the command line. A deny fails the exec with
// EACCES; an ask is let through by an approval already given (the
// command line's, or a scoped one), else asks the Approver, else fails.
// Every decision other than a plain allow is audited, and every refusal
// is in the report as a Denial of layer "rules".
type execCheck struct {
	rules *harness.Rules
	// plain are the rules before they knew the sandbox's mounts
	// (harness.Rules.InSandbox), for throughLinks; nil when they are the
	// same.
	plain *harness.Rules
	// approvals are the grants of the run (or of one command of a
	// session: its line's once grants); shared, in a session, those
	// that hold across its commands, where wider grants go.
	approvals *harness.Approvals
	shared    *harness.Approvals
	req       *Request
	runID     string
	dir       string

	ask   sync.Mutex     // one question at a time to a person
	clock *harness.Clock // paused while a person is asked
	spend *harness.Spend

	spentMu sync.Mutex
	spent   string // the first budget a request found spent

	// lineByFile says the command's own program was decided by the file
	// it is with its line, before the run (lineProgram): its exec, which
	// the backend may not even send, is let through as decided.
	lineByFile bool
	// firstAgain says the sandbox may start another file for the line
	// than the host decided (lineSeenAlike): the backend sends the
	// command's own exec (backend.Spec.CheckFirstExec), which is decided
	// by its file, and let through unasked only when that gives the
	// host's decision, lineProg, again.
	firstAgain bool
	lineProg   harness.Decision

	mu      sync.Mutex
	denials []backend.Denial
	index   map[string]int   // of denials, by what and rule
	refused map[int][]string // the argv each process was last refused
}

// maxExecDenials bounds the refused programs a report lists one by one:
// a command can exec a new argv for ever, and each refusal was an entry
// kept in moat's memory, looked through at every refusal, and printed
// (found by a tester). Past it, they are counted in one entry; the audit
// stream has each decision.
const maxExecDenials = 1000

// maxRefusedPids bounds the processes whose last refused argv is kept
// for again: past it, the memory starts afresh (a search of PATH then
// counts one refusal more).
const maxRefusedPids = 4096

// again reports whether c's process was just refused the same argv: a
// shell searching its PATH tries each directory in turn, and a person is
// asked, and a refusal counted, once per search.
func (e *execCheck) again(c backend.ExecCall) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	last, ok := e.refused[c.Pid]
	return ok && slices.Equal(last, c.Argv)
}

// decidedArgv is the argv grants are matched against for c, decided d:
// the words that decided (d.Command), which may name another program than
// c.Argv does (execve("/usr/bin/git", ["curl", "push"]) is decided as
// git push): a prefix a person approved for curl must not let git
// through. A grant's words are those a person was shown as the command
// asked about (harness.NewGrant), which are d.Command too.
func decidedArgv(c backend.ExecCall, d harness.Decision) []string {
	if d.Command != nil {
		return d.Command
	}
	return c.Argv
}

// use returns a grant that lets argv, asked about with d, run.
func (e *execCheck) use(argv []string, dir string, d harness.Decision) (harness.Grant, bool) {
	if g, ok := e.approvals.Use(argv, dir, d); ok || e.shared == nil {
		return g, ok
	}
	return e.shared.Use(argv, dir, d)
}

// callDir is the directory c runs in, as shown to a person and matched by
// an approval: the caller's own, or, where the backend could not read it
// (a path longer than the kernel names), unknownDir, which no grant bound
// to a directory matches. The run's directory stood in for it before: a
// command spent a grant for the directory a person was shown from one
// made deep enough.
func (e *execCheck) callDir(c backend.ExecCall) string {
	if c.Dir != "" {
		return c.Dir
	}
	return unknownDir
}

// unknownDir is callDir's name for a directory the backend could not read.
const unknownDir = "(a directory moat could not read)"

// keep records a grant wider than once, for what follows.
func (e *execCheck) keep(g harness.Grant) {
	if e.shared != nil {
		e.shared.Add(g)
		return
	}
	e.approvals.Add(g)
}

// check is the run's Stdio.CheckExec. A program no rule has anything to
// say about is let through at once; any decision a rule made (audited,
// an allow too; counted, maybe asked of a person) is made in the
// backend's pending call, off its supervisor.
func (e *execCheck) check(c backend.ExecCall) error {
	script := c.Path
	if script == "" {
		script = c.Resolved // an fexecve: the kernel names the script /dev/fd/N
	}
	// The command's own exec: its line was decided before the run (and
	// maybe approved), by its words only; what the line could not show,
	// the file its program is (a link, a script's interpreter), is
	// decided here.
	if c.First && e.lineByFile && !e.firstAgain {
		return nil // its file was decided with its line, on the host
	}
	if c.First && e.lineByFile {
		// The line's words were decided on the host; the file the
		// sandbox starts is decided here, and asked about only if it is
		// not what the host decided (and maybe asked) already.
		// (Its relative arguments were read from its working directory
		// with its line: decide.)
		d := e.decideProgram(c.Open, "", script, c.Argv, c.Resolved, 0, true)
		d = stronger(d, e.preloaded(c))
		d = e.throughLinks(c, script, d)
		if d.Verdict == harness.Allow && !c.Truncated && d.Rule == nil || sameDecision(d, e.lineProg) {
			return nil
		}
		if d.Verdict == harness.Allow && c.Truncated {
			d = harness.Decision{Verdict: harness.Deny, Reason: ReasonArgvTooLong}
		}
		return &backend.ExecPending{Wait: func(ctx context.Context) error { return e.decided(ctx, c, d) }}
	}
	d := e.decideProgram(c.Open, "", script, c.Argv, c.Resolved, 0, c.First)
	if !c.First {
		// Its relative arguments are where its working directory is:
		// cd /data && rm -rf sub deletes /data/sub. (The command's own
		// were read so with its line: decide.)
		d = stronger(d, e.rules.DecideExecFrom(c.Argv, c.Dir))
	}
	d = stronger(d, e.scriptFile(c))
	d = stronger(d, e.preloaded(c))
	if d.Verdict == harness.Allow {
		d = e.throughLinks(c, script, d)
	}
	if d.Verdict == harness.Allow && c.Truncated {
		// The rules saw a prefix of argv (more than execve itself takes,
		// or an argv changed while it was read): a word past it could be
		// the one a rule is about (git -c … push), so a prefix the rules
		// allow is refused rather than let through unchecked.
		d = harness.Decision{Verdict: harness.Deny, Reason: ReasonArgvTooLong}
	}
	if d.Verdict == harness.Allow && d.Rule == nil {
		return nil
	}
	// A rule's allow is recorded too, off the supervisor (decided).
	return &backend.ExecPending{Wait: func(ctx context.Context) error { return e.decided(ctx, c, d) }}
}

// preloaded decides c's program given code to load (c.Preload) by
// every name it has, as harness.Rules.DecidePreload says: the code runs
// in git as git, where no exec shows what it does (found by a tester:
// LD_PRELOAD=./pre.so git status turned itself into git push). The
// system's own libraries are not (systemPreload).
func (e *execCheck) preloaded(c backend.ExecCall) harness.Decision {
	var how []string
	for _, w := range c.Preload {
		if !systemPreload(e.req.Policy, w) {
			how = append(how, w)
		}
	}
	if len(how) == 0 {
		return harness.Decision{Verdict: harness.Allow}
	}
	var names []string
	for _, n := range []string{c.Path, c.Resolved} {
		if n != "" {
			names = append(names, path.Base(n))
		}
	}
	if len(c.Argv) > 0 && c.Argv[0] != "" {
		names = append(names, path.Base(c.Argv[0]))
	}
	return e.rules.DecidePreload(names, c.Argv, how)
}

// throughLinks decides again an exec that may run rm (mayRunRm) whose
// paths go through a symbolic link on their way, as the
// sandbox sees them, with each such path as the link leads: with
// /tmp/l or the workspace's l a link to a read_write path, rm -rf
// /tmp/l/s and rm -rf l/s delete there (found by testers), while the
// rules read /tmp/l/s as the sandbox's own and l/s as the workspace's.
// What the look cannot follow is decided as written out from there
// (sandboxPath); a relative path of a process whose working directory is
// not known, by the rules that do not know the sandbox's own trees
// (plain), as written.
func (e *execCheck) throughLinks(c backend.ExecCall, script string, d harness.Decision) harness.Decision {
	if len(c.Argv) < 2 || !slices.ContainsFunc(c.Argv[1:], func(w string) bool { return strings.Contains(w, "/") }) || !mayRunRm(c) {
		return d
	}
	resolved, linked, err := linksFollowed("/proc/"+strconv.Itoa(c.Pid)+"/root", c.Dir, c.Argv)
	if err != nil {
		// plain is nil where the rules never knew the sandbox's trees:
		// they are plain themselves, not a reason to let it through.
		plain := e.plain
		if plain == nil {
			plain = e.rules
		}
		p := (&execCheck{rules: plain}).decideProgram(c.Open, "", script, c.Argv, c.Resolved, 0, c.First)
		if !c.First {
			p = stronger(p, plain.DecideExecFrom(c.Argv, c.Dir))
		}
		return stronger(d, p)
	}
	if !linked {
		return d
	}
	// Its words as the links lead, the program's as it is.
	return stronger(d, e.decideProgram(c.Open, "", script, resolved, c.Resolved, 0, false))
}

// rmOfPaths says whether the command line argv may start rm (mayRunRm:
// its program is found at prog, the file file) on a path, which may pass
// through a link the line's words do not show (execCheck.throughLinks).
func rmOfPaths(argv []string, prog, file string) bool {
	if len(argv) < 2 || !slices.ContainsFunc(argv[1:], func(w string) bool { return strings.Contains(w, "/") }) {
		return false
	}
	c := backend.ExecCall{Path: prog, Resolved: file, Argv: argv}
	if file != "" {
		c.Open = func(string) (*os.File, error) { return os.Open(file) }
	}
	return mayRunRm(c)
}

// mentionsRm says whether a word or a program's name has "rm" in it: the
// cheap test before the look at links (rm, /usr/bin/rm, busybox's rm
// applet, xargs rm).
func mentionsRm(w string) bool { return strings.Contains(w, "rm") }

// mayRunRm says whether the exec c may run rm on its arguments: rm by any
// name the program has (a link to rm, exec -a, found by a tester), or a
// program that runs another named where its words do not show it: a
// script (its #! line may be rm, or a script whose line is: found by a
// tester), an ELF file whose interpreter is no dynamic loader, the
// dynamic loader itself (ld.so /usr/bin/rm).
func mayRunRm(c backend.ExecCall) bool {
	names := []string{c.Path, c.Resolved}
	if slices.ContainsFunc(append(names, c.Argv...), mentionsRm) {
		return true
	}
	for _, n := range append(names, c.Argv[0]) {
		if n != "" && harness.IsLoader(path.Base(n)) {
			return true
		}
	}
	if c.Open == nil {
		return false
	}
	interp, _, isELF, ok, _ := interpreter(c.Open, "")
	return ok && (!isELF || !harness.IsLoader(path.Base(interp)))
}

// linksFollowed returns argv with each of its paths (a word with a "/"
// that is no option) that passes through a symbolic link replaced by the
// absolute path it leads to (sandboxPath), and whether any was.
func linksFollowed(root, dir string, argv []string) ([]string, bool, error) {
	var out []string
	opts := true
	for i, w := range argv[1:] {
		if opts && w == "--" {
			opts = false
			continue
		}
		if opts && strings.HasPrefix(w, "-") || !strings.Contains(w, "/") {
			continue
		}
		p, linked, err := sandboxPath(root, dir, w)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", w, err)
		}
		if linked {
			if out == nil {
				out = slices.Clone(argv)
			}
			out[i+1] = p
		}
	}
	if out == nil {
		return argv, false, nil
	}
	return out, true, nil
}

// errNoDir: a relative path of a process whose working directory could
// not be read.
var errNoDir = errors.New("the working directory is not known")

// sandboxPath resolves the path w as a process of the sandbox whose root
// is root (its /proc/PID/root) and whose working directory is dir sees
// it: the symbolic links of the directories on its way are followed, in
// the sandbox's root, and of its last component too where w ends in "/"
// or "/." (rm follows a link named so; a link named plainly is what rm
// removes). linked says whether a link was followed. A component that
// does not exist (ENOENT, ENOTDIR) ends the walk, the rest appended as
// written: nothing beyond it can be deleted.
//
// What the walk cannot follow ends it too, the rest appended, and counts
// as a link, so that the path is decided as written out from there: the
// links of /proc (self, a descriptor, a process's cwd or root, which
// /dev/fd and a workspace's link may lead to) mean what they mean to the
// process, not to moat (found by a tester: l to /proc/self/fd/3, a
// descriptor of a read_write path, deleted there unasked); a name too
// long, a loop, a directory moat may not read. A path in /proc is
// outside every tree the rules spare, so such an rm is asked about.
func sandboxPath(root, dir, w string) (p string, linked bool, err error) {
	cur := "/"
	if !strings.HasPrefix(w, "/") {
		if !path.IsAbs(dir) {
			return "", false, errNoDir
		}
		cur = path.Clean(dir)
	}
	follow := strings.HasSuffix(w, "/") || strings.HasSuffix(w, "/.")
	rest := pathComponents(w)
	written := func(linked bool) (string, bool, error) {
		return path.Join(append([]string{cur}, rest...)...), linked, nil
	}
	for links := 0; len(rest) > 0; {
		if within("/proc", cur) {
			return written(true)
		}
		c := rest[0]
		if c == ".." {
			rest = rest[1:]
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		if len(rest) == 1 && !follow {
			return next, linked, nil
		}
		fi, err := os.Lstat(root + next)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return written(linked)
		}
		if err != nil {
			return written(true)
		}
		rest = rest[1:]
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		// The kernel's own bound on the links of one lookup.
		t, err := os.Readlink(root + next)
		if links++; err != nil || links > 40 {
			rest = append([]string{c}, rest...)
			return written(true)
		}
		if strings.HasPrefix(t, "/") {
			cur = "/"
		}
		rest = append(pathComponents(t), rest...)
		linked = true
	}
	if within("/proc", cur) {
		return cur, true, nil
	}
	return cur, linked, nil
}

// pathComponents splits p at "/", without the empty and "." components.
func pathComponents(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// scriptFile decides the script a shell is started on (sh deploy.sh,
// by any name the shell has: argv[0], its path, its file), by its name
// as given and by the file it is (a link d to deploy.sh is deploy.sh):
// the script runs, and no exec of it is seen. A tie keeps the shell's
// decision, which an approval of the line names.
func (e *execCheck) scriptFile(c backend.ExecCall) harness.Decision {
	d := harness.Decision{Verdict: harness.Allow}
	if len(c.Argv) == 0 {
		return d
	}
	for _, name := range []string{c.Argv[0], c.Path, c.Resolved} {
		// bash --rcfile deploy.sh -i: the file is sourced, as source
		// deploy.sh on a line is decided (found by a tester).
		if files := harness.ShellStartupFiles(name, c.Argv); len(files) > 0 {
			for _, f := range files {
				d = stronger(d, e.rules.DecideExec("", []string{"source", f}))
				d = stronger(d, e.sourcedFile(c, f))
			}
			break
		}
	}
	for _, name := range []string{c.Argv[0], c.Path, c.Resolved} {
		prog, ok := harness.ShellScriptFile(name, c.Argv)
		if !ok {
			continue
		}
		d = stronger(d, e.rules.DecideExec("", prog))
		if c.Open != nil {
			if f := fileName(c.Open, prog[0]); f != "" && path.Base(f) != path.Base(prog[0]) {
				d = stronger(d, e.rules.DecideExec("", append([]string{f}, prog[1:]...)))
			}
		}
		break
	}
	return d
}

// sourcedFile decides a file a shell sources at its start, by its name as
// given and by the file it is; one of a descriptor or a device holds a
// script no name shows, and is asked about.
func (e *execCheck) sourcedFile(c backend.ExecCall, f string) harness.Decision {
	if harness.DescriptorPath(f) {
		return harness.Decision{Verdict: harness.Ask, Reason: "the shell's startup file is a descriptor's or a device's (" + workspace.EscapeText(f) + "), whose script no name shows", Command: []string{"source", f}}
	}
	d := e.rules.DecideExec("", []string{f})
	if c.Open != nil {
		if real := fileName(c.Open, f); real != "" && path.Base(real) != path.Base(f) {
			d = stronger(d, e.rules.DecideExec("", []string{real}))
		}
	}
	return d
}

// maxInterp bounds how many #! interpreters and loaders are followed
// from one exec. The kernel follows at most 5 interpreters (more is
// ELOOP): following further than it does costs nothing, stopping short
// would let a deeper chain pass.
const maxInterp = 8

// decideProgram decides the program p (opened through open as which: ""
// for the exec's own program), run with argv, whose file the backend
// named resolved ("" unknown). The strongest of these decisions wins:
//   - argv, and argv under the name p (harness.Rules.DecideExec, which
//     also decides what a dynamic loader runs, by name);
//   - argv under the name of the file p is (a link to git is git);
//   - what a dynamic loader runs, under the name of the file it is;
//   - for a script, what the kernel runs: its #! interpreter, the
//     interpreter's optional argument, the script's path and argv[1:]
//     (a file ./origin holding "#!/usr/bin/git push" run as ./origin
//     main is git push ./origin main), followed as deep as the kernel
//     follows interpreters.
//
// open is nil where the backend cannot open the caller's files: then
// only the names are decided on.
//
// byFile leaves out the first of these, for the command's own exec,
// whose words were decided as its command line.
func (e *execCheck) decideProgram(open func(string) (*os.File, error), which, p string, argv []string, resolved string, depth int, byFile bool) harness.Decision {
	d := harness.Decision{Verdict: harness.Allow}
	if !byFile {
		d = e.rules.DecideExec(p, argv)
	}
	if resolved != "" && path.Base(resolved) != path.Base(p) {
		d = strongerRun(d, e.rules.DecideExec(resolved, argv))
	}
	if open == nil || depth >= maxInterp || len(argv) == 0 {
		return d
	}
	isMulti := harness.MultiCall(path.Base(p)) || harness.MultiCall(path.Base(resolved))
	if runner, ok := harness.AppletRunner(argv, isMulti); ok {
		// Its applets may run in its own process, unseen by this check.
		d = strongerRun(d, e.rules.DecideApplets(runner, applets(open, which)))
	}
	if harness.IsLoader(path.Base(p)) || harness.IsLoader(path.Base(resolved)) || harness.IsLoader(path.Base(argv[0])) {
		if prog, argv0, ok := harness.Loaded(argv); ok {
			args := prog
			if argv0 != "" {
				args = append([]string{argv0}, prog[1:]...)
			}
			name := fileName(open, prog[0])
			d = strongerRun(d, e.decideProgram(open, prog[0], prog[0], args, name, depth+1, false))
			if how := harness.LoaderPreloads(argv); len(how) > 0 {
				// Code the loader is told to load into it, as the
				// environment's LD_PRELOAD (preloaded).
				names := []string{path.Base(prog[0])}
				if name != "" {
					names = append(names, path.Base(name))
				}
				d = strongerRun(d, e.rules.DecidePreload(names, args, how))
			}
		}
	}
	interp, arg, isELF, ok, err := interpreter(open, which)
	if errors.Is(err, fs.ErrPermission) {
		// An executable file moat may not read (mode 0111, as moat runs
		// without root) that the sandbox could have made: the kernel
		// would still run its #! line (backend.ExecCall.Open).
		d = stronger(d, harness.Decision{Verdict: harness.Deny, Reason: ReasonUnreadable})
	}
	if ok && isELF {
		// The kernel maps an ELF's interpreter (PT_INTERP) itself and
		// starts it, with argv as given: any static program can be one
		// (an ELF whose interpreter is kubectl runs kubectl). The dynamic
		// loader, the interpreter of every dynamic program, runs this
		// file, decided above, and is not decided again.
		name := fileName(open, interp)
		if !harness.IsLoader(path.Base(interp)) || name != "" && !harness.IsLoader(path.Base(name)) {
			run := append([]string{interp}, argv[1:]...)
			d = strongerRun(d, e.decideProgram(open, interp, interp, run, name, depth+1, false))
		}
	} else if ok {
		run := []string{interp}
		if arg != "" {
			run = append(run, arg)
		}
		run = append(append(run, p), argv[1:]...)
		d = strongerRun(d, e.decideProgram(open, interp, interp, run, fileName(open, interp), depth+1, false))
	}
	return d
}

// maxMultiCall bounds how much of a multi-call binary is read for its
// applets' names: busybox and toybox are a few MiB.
const maxMultiCall = 64 << 20

// applets returns the names of the applets of the multi-call binary
// open(which) reads, from busybox's table of them (the sorted names,
// each ended by a NUL, from "[" and "[[" to an empty one); nil when it
// cannot be read or has no such table (toybox's is not one), which
// DecideApplets takes as every name. The file is searched a chunk at a
// time: read whole, the bound's worth of it was moat's memory, outside
// the sandbox's limits, for each exec of such a file (found by a tester).
func applets(open func(string) (*os.File, error), which string) []string {
	f, err := open(which)
	if err != nil {
		return nil
	}
	defer f.Close()
	src := io.LimitReader(f, maxMultiCall)
	marker := []byte("\x00[\x00[[\x00")
	buf := make([]byte, appletChunk)
	carry := 0
	for {
		n, err := io.ReadFull(src, buf[carry:])
		have := buf[:carry+n]
		if i := bytes.Index(have, marker); i >= 0 {
			return appletNames(bufio.NewReader(io.MultiReader(bytes.NewReader(have[i+1:]), src)))
		}
		if err != nil {
			return nil // the end, or a read error: no table
		}
		carry = copy(buf, have[len(have)-(len(marker)-1):])
	}
}

// appletChunk is how much of a multi-call binary applets holds at once.
const appletChunk = 1 << 20

// appletNames reads names ended by a NUL from r up to an empty one or the
// end.
func appletNames(r *bufio.Reader) []string {
	var out []string
	for {
		name, err := r.ReadBytes(0)
		if err != nil || len(name) <= 1 {
			return out
		}
		out = append(out, string(name[:len(name)-1]))
	}
}

// fileName is the host's name of the file p is to the caller, "" when it
// cannot be opened.
func fileName(open func(string) (*os.File, error), p string) string {
	f, err := open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	return f.Name()
}

// interpreter returns the interpreter and its optional argument of the
// script open(which) reads, as the kernel's binfmt_script reads them:
// the first line after "#!", looked for in the first 256 bytes
// (BINPRM_BUF_SIZE); with no newline there, the line ends before the
// last of them, which the kernel overwrites with its NUL (reading that
// byte too let "#!/usr/bin/git <pad>pushX" be decided as git pushX
// while git push ran). The interpreter ends at a space or a tab, the
// argument is the rest, trimmed. false when the file is no script or
// cannot be read, with open's error in the second case.
//
// For an ELF file, elf is set and interp is its PT_INTERP (see elfInterp).
func interpreter(open func(string) (*os.File, error), which string) (interp, arg string, elf, ok bool, err error) {
	f, err := open(which)
	if err != nil {
		return "", "", false, false, err
	}
	defer f.Close()
	buf := make([]byte, shebang.BufSize)
	n, _ := io.ReadFull(f, buf)
	if interp, ok := elfInterp(f, buf[:n]); ok {
		return interp, "", true, true, nil
	}
	interp, arg, ok = shebang.Parse(buf[:n])
	return interp, arg, false, ok, nil
}

// elfInterp returns the interpreter (PT_INTERP) of the ELF file f, whose
// first bytes are head, read as the kernel's binfmt_elf reads it: the
// first PT_INTERP program header's bytes, which must end with a NUL, as
// a C string. false when f is no ELF file or has none.
func elfInterp(f io.ReaderAt, head []byte) (string, bool) {
	if len(head) < 0x40 || string(head[:4]) != "\x7fELF" {
		return "", false
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if head[5] == 2 {
		bo = binary.BigEndian
	}
	var phoff uint64
	var entsize, num int
	switch head[4] {
	case 2: // ELFCLASS64
		phoff, entsize, num = bo.Uint64(head[0x20:]), int(bo.Uint16(head[0x36:])), int(bo.Uint16(head[0x38:]))
	case 1: // ELFCLASS32
		phoff, entsize, num = uint64(bo.Uint32(head[0x1c:])), int(bo.Uint16(head[0x2a:])), int(bo.Uint16(head[0x2c:]))
	default:
		return "", false
	}
	// The kernel reads at most 64 KiB of program headers.
	if entsize < 0x20 || num == 0 || entsize*num > 64<<10 {
		return "", false
	}
	ph := make([]byte, entsize*num)
	if _, err := f.ReadAt(ph, int64(phoff)); err != nil {
		return "", false
	}
	for i := range num {
		h := ph[i*entsize:]
		if bo.Uint32(h) != 3 { // PT_INTERP
			continue
		}
		var off, size uint64
		if head[4] == 2 {
			off, size = bo.Uint64(h[8:]), bo.Uint64(h[32:])
		} else {
			off, size = uint64(bo.Uint32(h[4:])), uint64(bo.Uint32(h[16:]))
		}
		if size < 2 || size > 4096 { // PATH_MAX
			return "", false
		}
		b := make([]byte, size)
		if _, err := f.ReadAt(b, int64(off)); err != nil || b[size-1] != 0 {
			return "", false
		}
		return string(b[:bytes.IndexByte(b, 0)]), true
	}
	return "", false
}

// stronger returns the stronger of two decisions, a if they are equal.
func stronger(a, b harness.Decision) harness.Decision {
	if rank(b.Verdict) > rank(a.Verdict) {
		return b
	}
	return a
}

// strongerRun is stronger for b, a decision about the program that runs
// (the file an exec's name leads to, a script's interpreter, what a
// loader or a multi-call binary runs), over a, one about the name it was
// called by: b wins a tie short of an allow too, so that the question
// and the grant are about what runs (see harness.runsWins).
func strongerRun(a, b harness.Decision) harness.Decision {
	if rank(b.Verdict) > rank(a.Verdict) || b.Verdict != harness.Allow && rank(b.Verdict) == rank(a.Verdict) {
		return b
	}
	return a
}

// auditDecision hands rec to Request.AuditDecision, if set: an error
// means the record was not written.
func (e *execCheck) auditDecision(rec audit.Decision) error {
	if e.req.AuditDecision == nil {
		return nil
	}
	return e.req.AuditDecision(rec)
}

// Unrecorded is why an action a rule let through was refused after all:
// its decision's record could not be written (the run's or the daemon's
// audit stream failed, err), and nothing a rule decides runs unrecorded.
func Unrecorded(err error) string {
	return fmt.Sprintf("refused because its record could not be written to the audit stream (%v)", err)
}

// rank orders verdicts, weakest first.
func rank(v harness.Verdict) int {
	switch v {
	case harness.Deny:
		return 2
	case harness.Ask:
		return 1
	}
	return 0
}

// decided is what becomes of c, which the rules did not simply allow (d).
func (e *execCheck) decided(ctx context.Context, c backend.ExecCall, d harness.Decision) (err error) {
	if e.again(c) {
		return fmt.Errorf("%w: refused already", ErrDenied)
	}
	dir := e.callDir(c)
	rec := audit.Decision{Type: audit.TypeDecision, Time: time.Now().UTC(), RunID: e.runID, At: "exec",
		Command: c.Argv, Dir: dir, Verdict: string(d.Verdict), Reason: d.Reason, Decided: d.Command}
	if d.Rule != nil {
		rec.Rule = d.Rule.String()
	}
	defer func() {
		if werr := e.auditDecision(rec); werr != nil && err == nil {
			err = e.refuse(c, d, Unrecorded(werr))
		}
	}()
	if d.Verdict == harness.Allow {
		return nil // a rule's allow: its record is all there is to do
	}
	if e.req.Learn {
		rec.Outcome = OutcomeLearn
		return nil
	}
	if d.Verdict == harness.Deny {
		why := "denied by the rule"
		if d.Rule == nil {
			why = d.Reason // no rule: the check itself refused it
		}
		return e.refuse(c, d, why)
	}
	if g, ok := e.use(decidedArgv(c, d), dir, d); ok {
		rec.Outcome, rec.Approver, rec.Scope, rec.Expires = ApprovalApproved, g.By, string(g.Scope), expiry(g)
		return nil
	}
	if e.req.Approver == nil {
		rec.Outcome = ApprovalNoApprover
		return e.refuse(c, d, "an ask nobody could answer")
	}
	e.ask.Lock()
	defer e.ask.Unlock()
	// An approval given while this one waited may cover it.
	if g, ok := e.use(decidedArgv(c, d), dir, d); ok {
		rec.Outcome, rec.Approver, rec.Scope, rec.Expires = ApprovalApproved, g.By, string(g.Scope), expiry(g)
		return nil
	}
	g, err := askPerson(ctx, e.req, harness.Action{Argv: c.Argv, Dir: dir}, d, &rec, e.clock)
	if g == nil {
		return e.refuse(c, d, "not approved: "+err.Error())
	}
	if g.Scope != harness.ScopeOnce {
		e.keep(*g)
	}
	return nil
}

func expiry(g harness.Grant) *time.Time {
	if g.Expires.IsZero() {
		return nil
	}
	t := g.Expires.UTC()
	return &t
}

// refuse counts a refused exec for the report and returns the error the
// backend turns into EACCES.
func (e *execCheck) refuse(c backend.ExecCall, d harness.Decision, why string) error {
	line := shellQuote(c.Argv)
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	// The denial names the program refused: its argv alone may name
	// another (execve("/usr/bin/id", ["true"])), or nothing.
	what := line
	program := c.Path // as the caller named it; a descriptor by its file
	if c.Resolved != "" && (program == "" || strings.HasPrefix(program, "/proc/") || strings.HasPrefix(program, "/dev/fd/")) {
		program = c.Resolved
	}
	switch {
	case len(c.Argv) == 0 && program != "":
		what, line = shellQuote([]string{program}), shellQuote([]string{path.Base(program)})
	case len(c.Argv) > 0 && program != "" && path.Base(c.Argv[0]) != path.Base(program):
		what = path.Base(program) + " (argv: " + line + ")"
	}
	rule := d.Reason
	if d.Rule != nil {
		rule = d.Rule.String()
		if !defaultReason(d) {
			rule += ": " + d.Reason
		}
	}
	if d.Verdict == harness.Ask {
		// An ask refused says why, or it reads as a deny.
		rule += "; " + why
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refused == nil || len(e.refused) >= maxRefusedPids {
		e.refused = map[int][]string{}
	}
	e.refused[c.Pid] = c.Argv
	if e.index == nil {
		e.index = map[string]int{}
	}
	key := what + "\x00" + rule
	if len(e.index) >= maxExecDenials {
		if _, ok := e.index[key]; !ok {
			key = "\x00more"
			what, rule = "other programs", fmt.Sprintf("past the first %d programs refused, counted here (the --audit stream has each)", maxExecDenials)
		}
	}
	if i, ok := e.index[key]; ok {
		e.denials[i].Count++
		return fmt.Errorf("%w: %s", ErrDenied, why)
	}
	e.index[key] = len(e.denials)
	hint := "change the policy's [[rules]] to allow it (moat policy explain -- " + line + " shows which rule decides)"
	switch {
	case d.Reason == ReasonArgvTooLong && d.Rule == nil:
		hint = "pass fewer or shorter arguments (execve itself takes at most 6 MiB, 128 KiB a word)"
	case d.Reason == ReasonUnreadable && d.Rule == nil:
		hint = "make the file readable (chmod u+r)"
	case d.Verdict == harness.Ask:
		hint = why + ": approve it when asked, or " + hint
	}
	if key == "\x00more" {
		hint = "the --audit stream lists each decision"
	}
	e.denials = append(e.denials, backend.Denial{Layer: LayerRules, What: what, Errno: "EACCES", Count: 1, Rule: rule, Hint: hint})
	return fmt.Errorf("%w: %s", ErrDenied, why)
}

// report returns the refused execs, each once with its count.
func (e *execCheck) report() []backend.Denial {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]backend.Denial(nil), e.denials...)
}

// grantLine records, once a person has approved the command line a, that
// each command of it the rules ask about may start once: the person saw
// them, and they are not asked about again at their exec.
//
// The line's own argv gets none: the backend lets the command's own exec
// through as decided (backend.ExecCall.First), and a grant left for it
// would let a second run of it through unasked.
//
// Each is bound to the directory the person was shown: a script the line
// starts could otherwise spend it on the same words elsewhere first (a
// push from another repository). A command of the line that runs after a
// cd is asked about again, in its own directory.
func grantLine(ap *harness.Approvals, rules *harness.Rules, a harness.Action, by string) {
	for _, argv := range rules.Asks(a) {
		if !slices.Equal(argv, a.Argv) {
			ap.Add(harness.Grant{Scope: harness.ScopeOnce, Argv: argv, Dir: a.Dir, By: by})
		}
	}
}

// host is the egress proxy's Check: the policy's host rules about a
// destination [network] allows. A deny refuses the request (403 naming
// the rule); an ask waits in the proxy for an approval (a session one
// given before, or the Approver's), and is refused without one.
func (e *execCheck) host(ctx context.Context, q egress.Query) egress.Verdict {
	v := e.hostRules(ctx, q)
	if !v.Allow || e.spend == nil || q.Intercepted && q.Method == "" {
		return v
	}
	// Budgets count what the rules let through: a tunnel, a forwarded
	// request, or each request read inside an intercepted tunnel (not
	// that tunnel too).
	if err := e.spend.Request(q.Host); err != nil {
		var be *harness.BudgetError
		errors.As(err, &be)
		e.spentMu.Lock()
		if e.spent == "" {
			e.spent = be.Name
		}
		e.spentMu.Unlock()
		return egress.Verdict{Rule: "budget " + be.Name, Reason: fmt.Sprintf("%v; raise it in the policy's [budgets]", err)}
	}
	return v
}

// spentBudget is the first budget a request found spent, or "".
func (e *execCheck) spentBudget() string {
	e.spentMu.Lock()
	defer e.spentMu.Unlock()
	return e.spent
}

func (e *execCheck) hostRules(ctx context.Context, q egress.Query) (v egress.Verdict) {
	r := harness.Request{Host: q.Host, Port: q.Port, Method: q.Method, Path: q.Path, MethodOverrides: q.MethodOverrides, PathOverrides: q.PathOverrides, Intercepted: q.Intercepted}
	d := e.rules.DecideHost(r)
	if d.Verdict == harness.Allow && d.Rule == nil {
		return egress.Verdict{Allow: true}
	}
	dest := fmt.Sprintf("%s:%d%s", q.Host, q.Port, q.Path)
	what := []string{"CONNECT", dest}
	if q.Method != "" {
		what[0] = q.Method
	}
	rec := audit.Decision{Type: audit.TypeDecision, Time: time.Now().UTC(), RunID: e.runID, At: "network",
		Command: what, Verdict: string(d.Verdict), Reason: d.Reason, Rule: d.Rule.String()}
	refuse := func(why string) egress.Verdict {
		return egress.Verdict{Rule: d.Rule.String(), Reason: fmt.Sprintf("the [[rules]] entry %s %s %s%s; %s", d.Rule, d.Verdict.Verb(), dest, because(d), why)}
	}
	defer func() {
		if werr := e.auditDecision(rec); werr != nil && v.Allow {
			v = refuse(Unrecorded(werr))
		}
	}()
	if d.Verdict == harness.Allow {
		return egress.Verdict{Allow: true, Rule: d.Rule.String()} // recorded as it goes
	}
	if e.req.Learn {
		rec.Outcome = OutcomeLearn
		return egress.Verdict{Allow: true, Rule: d.Rule.String()}
	}
	if d.Verdict == harness.Deny {
		return refuse("change the policy's [[rules]] to allow it")
	}
	if g, ok := e.use(nil, "", d); ok {
		rec.Outcome, rec.Approver, rec.Scope, rec.Expires = ApprovalApproved, g.By, string(g.Scope), expiry(g)
		return egress.Verdict{Allow: true, Rule: d.Rule.String()}
	}
	if e.req.Approver == nil {
		rec.Outcome = ApprovalNoApprover
		return refuse("nobody can be asked here: run moat in a terminal to approve it, or allow it in the policy's [[rules]]")
	}
	e.ask.Lock()
	defer e.ask.Unlock()
	if g, ok := e.use(nil, "", d); ok {
		rec.Outcome, rec.Approver, rec.Scope, rec.Expires = ApprovalApproved, g.By, string(g.Scope), expiry(g)
		return egress.Verdict{Allow: true, Rule: d.Rule.String()}
	}
	g, err := askPerson(ctx, e.req, harness.Action{Request: &r, Dir: e.dir}, d, &rec, e.clock)
	if g == nil {
		return refuse("not approved: " + err.Error())
	}
	if g.Scope == harness.ScopeSession {
		e.keep(*g)
	}
	return egress.Verdict{Allow: true, Rule: d.Rule.String()}
}

// lineProgram decides the command line's own program by the file it is,
// on the host, before the run: what its words cannot show (a link to git,
// a script whose #! line is git push, what a dynamic loader runs). The
// native direct start lets that exec through without sending it to the
// host (a round trip on every start), so it is decided here, where
// nothing of the sandbox runs yet to change the file: the program is
// looked up as init will, in dir or on the sandbox's PATH, in the host's
// view of the paths a run shows (the workspace and the system
// directories are the same paths; the sandbox's /tmp and home start
// empty). It returns an allow when the program is not found (the run
// then fails to start it).
func lineProgram(rules *harness.Rules, argv []string, dir string, env []string) (d harness.Decision, prog, resolved string) {
	allow := harness.Decision{Verdict: harness.Allow}
	if len(argv) == 0 || rules.Empty() {
		return allow, "", ""
	}
	prog = hostLookPath(argv[0], dir, env)
	if prog == "" {
		return allow, "", ""
	}
	resolved, err := filepath.EvalSymlinks(prog)
	if err != nil {
		return allow, prog, ""
	}
	open := func(p string) (*os.File, error) {
		if p == "" {
			p = resolved
		} else if !filepath.IsAbs(p) {
			p = under(dir, p)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, err
		}
		// Not a FIFO or a device, which could block or answer anything.
		f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			if st, ok := statOf(real); ok && st.Uid == 0 {
				// A file of the host's root that moat may not read:
				// nothing of the sandbox made it (backend.ExecCall.Open).
				return nil, errors.New("a file of the host's root that moat may not read")
			}
			return nil, err
		}
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			f.Close()
			return nil, errors.New("not a regular file")
		}
		return f, nil
	}
	e := &execCheck{rules: rules}
	return e.decideProgram(open, "", argv[0], argv, resolved, 0, true), prog, resolved
}

// lineSeenAlike reports whether the sandbox starts the same file as the
// host found for the command line's program (prog as looked up,
// resolved as its links lead; "" for none), which lineProgram decided
// before the run, and which the direct start then lets through unasked.
// It is not so where the sandbox's view of that path can differ from the
// host's, or the file there can change before the exec: a path outside
// the host's system directories, or one there that anyone but root may
// write (hostStable); an overlay or copy change set that already holds changes (a
// --session's: a link or a script the last run left there, found by a
// tester), a deny mask on the path, or, for root, whose permission checks
// pass where the sandbox's user's fail, a directory on the path or the
// file itself that others may not search or run (a PATH directory of
// mode 0 held a harmless program for root and none for the command,
// whose search went on to id, found by a tester). A path the host found
// nothing at is none in the sandbox either, but for a change set.
func lineSeenAlike(p *policy.Policy, prog, resolved string, freshChanges bool) bool {
	if !freshChanges {
		return false
	}
	if prog == "" {
		return true
	}
	if resolved == "" {
		return false
	}
	return rootsOnly(p, prog, true)
}

// rootsOnly says whether the host's root alone can change what the
// sandbox finds at f, and finds there what the host does: every path the
// kernel goes through to it (each link's own place and what it names
// included) lies in the host's system directories (hostStable), is shown
// by p and not denied, and is root's and written by no one else. For a
// program (exec), root's reach matters too: for root, whose permission
// checks pass where the sandbox's user's fail, a directory on the way or
// the file itself that others may not search or run.
func rootsOnly(p *policy.Policy, f string, exec bool) bool {
	// A path the sandbox does not have (a link by way of /srv/..) fails
	// its search there, which goes on to the next directory of PATH
	// (found by a reviewer).
	visits, _, ok := pathwalk.Walk(f)
	if !ok {
		return false
	}
	roots := append([]string{p.Workspace.Path}, p.Filesystem.ReadOnly...)
	roots = append(roots, p.Filesystem.ReadWrite...)
	shown := func(f string) bool {
		for _, d := range roots {
			// At or below a path the sandbox shows, or above one (the
			// directories its mounts are made in).
			if within(d, f) || within(f, d) {
				return true
			}
		}
		return false
	}
	// A deny is masked where it is named and where its links lead.
	denied := slices.Clone(p.Filesystem.Deny)
	for _, d := range p.Filesystem.Deny {
		if r, err := filepath.EvalSymlinks(d); err == nil && r != d {
			denied = append(denied, r)
		}
	}
	root := os.Geteuid() == 0
	for i, v := range visits {
		if !shown(v) || !hostStable(v) {
			return false
		}
		for _, d := range denied {
			if within(d, v) {
				return false
			}
		}
		fi, err := os.Lstat(v)
		if err != nil {
			return false
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			continue // replaced only through its directory, a visit too
		}
		// Only the host's root can replace it, or write into it.
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
			return false
		}
		if exec && root && (fi.IsDir() || i == len(visits)-1) && fi.Mode().Perm()&0o001 == 0 {
			return false
		}
	}
	return true
}

// systemPreload says whether the loader's variable w (NAME=VALUE, one of
// seccomp.PreloadVars) names only the system's own code for the sandbox
// p makes: each entry an absolute path that rootsOnly holds, with none of
// the loader's $ORIGIN-style tokens. A conda, CUDA or JDK set-up exports
// LD_LIBRARY_PATH to such a directory for every program (found by a
// tester: any value refused git and python3), and what loads from there
// is what the host's root installed, which no command can have planted.
// An empty entry is the working directory to the loader (LD_PRELOAD's
// alone are skipped), so it is not the system's (found by a tester:
// LD_LIBRARY_PATH=: loaded ./libz.so.1 into git status, which pushed).
func systemPreload(p *policy.Policy, w string) bool {
	if p == nil {
		return false
	}
	name, value, _ := strings.Cut(w, "=")
	seps := ":"
	switch name {
	case "LD_PRELOAD":
		seps = " :"
	case "LD_LIBRARY_PATH":
		seps = ":;"
	}
	for e := range splitAny(value, seps) {
		if e == "" && name == "LD_PRELOAD" {
			continue
		}
		if !path.IsAbs(e) || path.Clean(e) != e || strings.Contains(e, "$") || !rootsOnly(p, e, false) {
			return false
		}
	}
	return true
}

// splitAny yields the parts of s between any of the bytes of seps,
// empty ones included.
func splitAny(s, seps string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for {
			i := strings.IndexAny(s, seps)
			if i < 0 {
				yield(s)
				return
			}
			if !yield(s[:i]) {
				return
			}
			s = s[i+1:]
		}
	}
}

// sandboxTrees returns the trees spec makes the sandbox's own, which go
// with it (its tmpfs mounts, /tmp and home, and /dev's shm), and the
// host paths it binds writable, for harness.Rules.InSandbox.
func sandboxTrees(spec *backend.Spec) (own, binds []string) {
	for _, m := range spec.Mounts {
		switch {
		case m.Kind == backend.MountTmpfs:
			own = append(own, m.Target)
		case m.Kind == backend.MountDev:
			own = append(own, path.Join(m.Target, "shm"))
		case (m.Kind == backend.MountBind || m.Kind == backend.MountOverlay) && !m.ReadOnly:
			binds = append(binds, m.Target)
		}
	}
	return own, binds
}

// lineRules are the rules a run's command line is decided by, before its
// mounts exist: rules, or, where the built-in delete-outside rule would
// ask about the line (an rm of a path in /tmp, written out), rules that
// know the sandbox's own trees and the host paths its mounts will bind
// writable (the read_write paths, the git directories outside the
// workspace and each read_write path that the guards bind: found as the
// guards will find them), as its programs' execs are decided.
func lineRules(rules *harness.Rules, p *policy.Policy, argv []string, dir string, env []string) *harness.Rules {
	if !slices.ContainsFunc(argv, func(w string) bool { return strings.Contains(w, "rm") }) {
		return rules
	}
	d := rules.Decide(harness.Action{Argv: argv, Dir: dir})
	if d.Rule == nil || d.Rule.Set != policy.BuiltinIrreversible || d.Rule.Name != "delete-outside" {
		return rules
	}
	binds := slices.Clone(p.Filesystem.ReadWrite)
	for _, tree := range append([]string{p.Workspace.Path}, p.Filesystem.ReadWrite...) {
		dirs, ok := workspace.ExternalGitDirs(tree)
		if !ok {
			return rules
		}
		binds = append(binds, dirs...)
	}
	return rules.InSandbox([]string{"/tmp", sandboxHome(env), "/dev/shm"}, binds)
}

// testHookLineDecided, when set (by tests), runs once the command line
// was decided on the host, before the sandbox starts.
var testHookLineDecided func()

// hostStable says whether the place p is one no sandbox and no user but
// the host's root can change while a run starts: in the host's system
// directories, where no sandbox may be given a writable path
// (hostSystem). Anywhere else (a workspace, a read-write path, another
// run's workspace, a directory of the user's) the file a path names can
// be swapped between the host's decision and the command's exec, by
// another sandbox of the same workspace or a tool of the agent's on the
// host (found by a tester: a concurrent run flipped ./tool to a link to
// git as inotify saw moat read it, and git push ran unrecorded).
func hostStable(p string) bool {
	for _, d := range hostSystemDirs {
		if d != "/var/lib" && d != "/var/spool" && within(d, p) {
			return true
		}
	}
	return p == "/"
}

// sameDecision says whether a and b are the same decision: verdict, rule
// and words.
func sameDecision(a, b harness.Decision) bool {
	if a.Verdict != b.Verdict || !slices.Equal(a.Command, b.Command) || (a.Rule == nil) != (b.Rule == nil) {
		return false
	}
	return a.Rule == nil || *a.Rule == *b.Rule
}

// statOf is the system's stat of the file p, false when there is none.
func statOf(p string) (*syscall.Stat_t, bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return st, ok
}

// hostLookPath finds the program name as the sandbox's init will: a name
// with a slash relative to dir, any other on env's PATH; "" when there is
// no executable regular file.
func hostLookPath(name, dir string, env []string) string {
	executable := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
	}
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = under(dir, name)
		}
		if executable(name) {
			return name
		}
		return ""
	}
	for _, d := range lookpath.Dirs(env, "") {
		if !filepath.IsAbs(d) {
			d = under(dir, d)
		}
		if p := under(d, name); executable(p) {
			return p
		}
	}
	return ""
}

// under is rel in dir, not cleaned: a ".." after a link in rel leaves
// the link's target, as the kernel walks it (l/../s, l a link to
// sub/deep, is sub/s), where filepath.Join would take it lexically (s).
func under(dir, rel string) string {
	return strings.TrimSuffix(dir, "/") + "/" + rel
}
