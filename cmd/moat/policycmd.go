package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
)

// cmdPolicyExplain prints the decision the policy's rules make about a
// command line, without running it.
func cmdPolicyExplain(args []string, stdout, stderr io.Writer) int {
	f := newRunFlags("policy explain")
	f.showOnly = true
	if ok, code := f.parse(args, stdout, stderr); !ok {
		return code
	}
	argv := f.fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "usage: moat policy explain [--policy FILE] [run flags] -- CMD [ARGS...]")
		return 2
	}
	p, err := f.loadPolicy(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "moat: %v\n", err)
		return exitMoatError
	}
	d := harness.New(p).Decide(harness.Action{Argv: argv})
	switch {
	case d.Rule == nil && d.Verdict == harness.Allow:
		fmt.Fprintln(stdout, "allowed: no rule matches")
		return 0
	case d.Rule == nil:
		fmt.Fprintf(stdout, "%s: %s\n", d.Verdict, d.Reason)
	default:
		fmt.Fprintf(stdout, "%s by rule %s: %s\n", d.Verdict, d.Rule, d.Reason)
	}
	if len(d.Command) > 0 && !equalArgv(d.Command, argv) {
		fmt.Fprintf(stdout, "  decided by the simple command: %s\n", strings.Join(d.Command, " "))
	}
	return 0
}

func equalArgv(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// cmdPolicyCheck validates policy files and runs their rules' examples.
func cmdPolicyCheck(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "usage: moat policy check FILE...")
		return 2
	}
	code := 0
	for _, file := range args {
		p, err := policy.Load(file)
		if err == nil {
			err = p.Validate()
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
			}
			examples := "no examples"
			if n := len(r.ExamplesMatch) + len(r.ExamplesNotMatch); n > 0 {
				examples = fmt.Sprintf("%d examples, all pass", n)
			}
			fmt.Fprintf(stdout, "%s:%d: %s: %s %s (%s)\n", file, p.RuleLine(i), p.RuleName(i), r.Decision, what, examples)
		}
		fmt.Fprintf(stdout, "%s: valid, %d rules; built-in sets: %s\n", file, len(p.Rules), setsOrNone(p.Harness.Builtin))
	}
	return code
}

func setsOrNone(sets []string) string {
	if len(sets) == 0 {
		return "none"
	}
	return strings.Join(sets, ", ")
}
