package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// cmdPolicyExplain prints the decision the policy's rules make about a
// command line, or with --write PATH about a change the API makes to a
// workspace path, without running it.
func cmdPolicyExplain(args []string, stdout, stderr io.Writer) int {
	write, args, ok := cutWriteFlag(args)
	if !ok {
		fmt.Fprintln(stderr, "moat: --write needs a path relative to the workspace")
		return 2
	}
	f := newRunFlags("policy explain")
	f.showOnly = true
	if ok, code := f.parse(args, stdout, stderr); !ok {
		return code
	}
	argv := f.fs.Args()
	if len(argv) == 0 && write == "" || len(argv) > 0 && write != "" {
		fmt.Fprintln(stderr, "usage: moat policy explain [--policy FILE] [run flags] -- CMD [ARGS...]\n       moat policy explain [--policy FILE] --write PATH")
		return 2
	}
	p, err := f.loadPolicy(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "moat: %v\n", err)
		return exitMoatError
	}
	if c := path.Clean(write); write != "" && (path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../")) {
		fmt.Fprintf(stderr, "moat: --write %s: write rules are about paths relative to the workspace, inside it\n", write)
		return 2
	}
	var d harness.Decision
	if write != "" {
		d = harness.New(p).DecideWrite(write)
		argv = d.Command
	} else {
		// As moat run decides it: the words, and the file the program
		// is (a link named tool to a denied program).
		cwd, _ := os.Getwd()
		d = sandbox.DecideLine(p, argv, cwd, os.Environ())
	}
	switch {
	case d.Rule == nil && d.Verdict == harness.Allow:
		fmt.Fprintln(stdout, "allowed: no rule matches")
		if write == "" {
			// What the line hides (flock /tmp/l id, git -c core.pager=id
			// log, a trap) is decided only when it runs.
			fmt.Fprintln(stdout, "  (of the line as written: each program it starts is checked again as it runs)")
		}
		return 0
	case d.Rule == nil:
		fmt.Fprintf(stdout, "%s: %s\n", d.Verdict, workspace.EscapeText(d.Reason))
	case d.Reason == "rule "+d.Rule.String():
		// A rule without a reason: the harness names the rule instead.
		fmt.Fprintf(stdout, "%s by rule %s (it gives no reason)\n", d.Verdict, d.Rule)
	default:
		fmt.Fprintf(stdout, "%s by rule %s: %s\n", d.Verdict, d.Rule, workspace.EscapeText(d.Reason))
	}
	// The words as a command_regex reads them (policy.CommandWords), so a
	// word with a space or a newline in it shows as the rules saw it.
	// A write rule reads the path whole: CommandWords would take its
	// last component for a program's name.
	if write != "" {
		// nothing to add: the path is as given, cleaned
	} else if words := policy.CommandWords(d.Command); len(d.Command) > 0 && !equalArgv(d.Command, argv) {
		fmt.Fprintf(stdout, "  decided by the simple command: %s\n", workspace.EscapeText(words))
	} else if len(d.Command) > 0 && words != strings.Join(d.Command, " ") {
		fmt.Fprintf(stdout, "  the rules read it as: %s\n", workspace.EscapeText(words))
	}
	return 0
}

// cutWriteFlag takes --write PATH (or --write=PATH) out of the flags
// before "--"; ok is false when it has no path.
func cutWriteFlag(args []string) (write string, rest []string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return write, append(rest, args[i:]...), true
		case a == "--write" || a == "-write":
			if i+1 >= len(args) || args[i+1] == "" {
				return "", nil, false
			}
			write = args[i+1]
			i++
		case strings.HasPrefix(a, "--write=") || strings.HasPrefix(a, "-write="):
			if _, write, _ = strings.Cut(a, "="); write == "" {
				return "", nil, false
			}
		default:
			rest = append(rest, a)
		}
	}
	return write, rest, true
}

func equalArgv(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// cmdPolicyCheck validates policy files and runs their rules' examples.
func cmdPolicyCheck(args []string, stdout, stderr io.Writer) int {
	args, ok, code := operands("policy check", "usage: moat policy check FILE...", args, 1, -1, stderr)
	if !ok {
		return code
	}
	for _, file := range args {
		p, err := policy.Load(file)
		if err == nil {
			// What moat run checks: the policy's own rules, the network
			// lists as the proxy reads them (a public suffix is too broad)
			// and the seccomp profile it names, listed together.
			// Paths are resolved first, as run resolves them: a relative
			// profile is the policy file's neighbour.
			var all policy.Errors
			cwd, _ := os.Getwd()
			home, _ := os.UserHomeDir()
			rerr := p.ResolveAndValidate(cwd, home)
			var wrerr error
			if rerr == nil {
				if wrerr = sandbox.CheckWritablePaths(p, home); wrerr == nil {
					wrerr = sandbox.CheckWorkspacePaths(p)
				}
			}
			for _, e := range []error{rerr, sandbox.CheckPolicy(p), sandbox.CheckPolicyProfile(p), wrerr} {
				var pe *policy.Errors
				switch {
				case errors.As(e, &pe):
					// The network lists are read by both: a problem of
					// theirs is listed once.
					for _, fe := range *pe {
						if !slices.ContainsFunc(all, func(x *policy.FieldError) bool { return x.Error() == fe.Error() }) {
							all = append(all, fe)
						}
					}
				case e != nil && err == nil:
					err = e
				}
			}
			if err == nil && len(all) > 0 {
				err = policy.BoundErrors(all)
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "%v\n", err)
			code = 1
			continue
		}
		for i, r := range p.Rules {
			what := "command " + strings.Join(r.Match.Command, " ")
			switch {
			case r.Match.CommandRegex != "":
				what = "command_regex " + r.Match.CommandRegex
			case r.Match.Write != "":
				what = "write " + r.Match.Write
			case r.Match.Host != "":
				what = "host " + r.Match.Host
				if r.Match.Port != 0 {
					what += fmt.Sprintf(":%d", r.Match.Port)
				}
				if r.Match.Method != "" {
					what = r.Match.Method + " " + what
				}
				what += r.Match.Path
			}
			what = workspace.EscapeText(what)
			examples := "no examples"
			if n := len(r.ExamplesMatch) + len(r.ExamplesNotMatch); n > 0 {
				examples = fmt.Sprintf("%d examples, all pass", n)
			}
			fmt.Fprintf(stdout, "%s:%d: %s: %s %s (%s)\n", file, p.RuleLine(i), p.RuleName(i), r.Decision, what, examples)
		}
		for _, g := range sandbox.PolicyGaps(p) {
			fmt.Fprintf(stderr, "%s: warning: moat run refuses this policy unless --allow-degraded: %s\n", file, g)
		}
		rules := fmt.Sprintf("%d rules", len(p.Rules))
		if len(p.Rules) == 1 {
			rules = "1 rule"
		}
		fmt.Fprintf(stdout, "%s: valid, %s; built-in sets: %s\n", file, rules, setsOrNone(p.Harness.Builtin))
	}
	return code
}

func setsOrNone(sets []string) string {
	if len(sets) == 0 {
		return "none"
	}
	return strings.Join(sets, ", ")
}

// maxSuggestInput bounds the stream policy suggest reads whole: far more
// than a --learn run writes, and a bound on moat's memory whatever the
// file is.
const maxSuggestInput = 256 << 20

// readStream reads the stream at name (a file or a pipe, as audit verify
// takes: not a directory or a device, which might never end) whole, up to
// max bytes; a longer one is refused.
func readStream(name string, max int64) ([]byte, error) {
	if err := streamFile(os.Stat(name)); err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err := streamFile(fi, err); err != nil {
		return nil, err
	}
	tooLong := fmt.Errorf("more than %d MiB: suggest from a part of it (tail -n, or the records of one run)", max>>20)
	if fi.Mode().IsRegular() && fi.Size() > max {
		return nil, tooLong // said before it is read
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, tooLong
	}
	return b, nil
}

// cmdPolicySuggest prints the policy additions that would have let through
// what an audit stream shows refused or asked about (harness.Suggest), each
// with the records behind it, for a person to review. It changes nothing.
func cmdPolicySuggest(args []string, stdout, stderr io.Writer) int {
	args, ok, code := operands("policy suggest", "usage: moat policy suggest AUDIT.jsonl (an --audit stream, best of a --learn run)", args, 1, 1, stderr)
	if !ok {
		return code
	}
	b, err := readStream(args[0], maxSuggestInput)
	if err != nil {
		fmt.Fprintf(stderr, "moat: %s: %v\n", args[0], err)
		return 1
	}
	if _, _, err := audit.Verify(bytes.NewReader(b)); err != nil {
		fmt.Fprintf(stderr, "moat: WARNING: %s: %v; suggesting from it anyway\n", args[0], err)
	}
	var recs []harness.Record
	dropped := 0
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r harness.Record
		if err := json.Unmarshal(line, &r); err != nil {
			fmt.Fprintf(stderr, "moat: %s:%d: not an audit record: %v\n", args[0], i+1, err)
			return 1
		}
		recs = append(recs, r)
		if r.Type == audit.TypeDropped {
			dropped += r.Count
		}
	}
	if dropped > 0 {
		fmt.Fprintf(stderr, "moat: WARNING: %s: %d records were not written (the stream made more than its rate): what they were is missing from these suggestions\n", args[0], dropped)
	}
	sugg := harness.Suggest(recs)
	if len(sugg) == 0 {
		fmt.Fprintln(stdout, "# nothing to suggest: no refusal or unapproved ask in this stream")
		return 0
	}
	fmt.Fprintf(stdout, "# moat policy suggest %s: additions for a person to review; nothing was changed.\n", args[0])
	// The [network] lists, each entry under the records behind it. An
	// allow entry the egress proxy would refuse (a public suffix, which
	// only its list knows) is printed commented out, with why, so what
	// is printed is a policy that loads.
	var allow, cidrs []harness.Suggestion
	for _, s := range sugg {
		switch s.Kind {
		case "network.allow":
			allow = append(allow, s)
		case "network.allow_cidrs":
			cidrs = append(cidrs, s)
		}
	}
	if len(allow)+len(cidrs) > 0 {
		// The lists are read in allow mode only (a policy that lists
		// hosts under the default, none, is refused).
		fmt.Fprintln(stdout, "\n[network]\nmode = \"allow\"")
	}
	for _, list := range []struct {
		key     string
		entries []harness.Suggestion
	}{{"allow", allow}, {"allow_cidrs", cidrs}} {
		if len(list.entries) == 0 {
			continue
		}
		fmt.Fprintf(stdout, "%s = [\n", list.key)
		for _, s := range list.entries {
			for _, w := range s.Because {
				fmt.Fprintf(stdout, "  # %s\n", workspace.EscapeText(w))
			}
			var err error
			if list.key == "allow" {
				_, err = egress.ParseRules([]string{s.Entry}, nil, nil)
			}
			if err != nil {
				fmt.Fprintf(stdout, "  # not suggested: %s\n", workspace.EscapeText(err.Error()))
				fmt.Fprintf(stdout, "  # %q,\n", s.Entry)
				continue
			}
			fmt.Fprintf(stdout, "  %q,\n", s.Entry)
		}
		fmt.Fprintln(stdout, "]")
	}
	for _, s := range sugg {
		if s.Kind == "network.allow" || s.Kind == "network.allow_cidrs" {
			continue
		}
		fmt.Fprintln(stdout)
		// A comment line is one line: an audit stream is text anyone
		// who could write the file chose, and a newline in it would
		// put a line of TOML under the person's eyes.
		for _, w := range s.Because {
			fmt.Fprintf(stdout, "# %s\n", workspace.EscapeText(w))
		}
		if s.Kind == "note" {
			fmt.Fprintf(stdout, "# %s\n", workspace.EscapeText(s.Entry))
			continue
		}
		if s.Kind == "change" {
			fmt.Fprintf(stdout, "# the policy's own rule %s decided: an allow rule beside it would not win (deny beats ask beats allow); change its decision or narrow its match\n", workspace.EscapeText(s.Entry))
			continue
		}
		fmt.Fprintln(stdout, s.Entry)
	}
	return 0
}
