package harness

import (
	"path"
	"regexp/syntax"
	"slices"
	"strings"
)

// A multi-call binary's shell (busybox sh, ash, hush) runs some of its
// applets in its own process, without an exec (busybox's "NOFORK"
// applets when it was built as a standalone shell: rm, uname, echo...),
// and its xargs and find do the same for the commands they run: no exec
// of the applet's is seen, so no rule about it is consulted. Which
// applets run so depends on how the binary was built, which cannot be
// read from it cheaply, so such a start is decided as if it could run
// every applet the binary includes in its own process.

// AppletRunner returns, for a program started with argv whose file is
// a multi-call binary's (isMulti: by the name it was started from or the
// name of the file it is, a link named sh to busybox being busybox), the
// applet that would run other applets in the binary's own process (a
// shell, xargs, find); false for any other start. The binary picks its
// applet as busybox does: argv[0]'s base name, or, when that is the
// binary's own (busybox sh -c ...), the first operand.
func AppletRunner(argv []string, isMulti bool) (string, bool) {
	if len(argv) == 0 {
		return "", false
	}
	name := strings.TrimPrefix(baseName(argv[0]), "-") // a login shell is -sh
	switch {
	case multiCall(name):
		if len(argv) < 2 || strings.HasPrefix(argv[1], "-") {
			return "", false // the binary alone, or its own options
		}
		name = baseName(argv[1])
	case !isMulti:
		return "", false
	}
	switch name {
	case "sh", "ash", "hush", "bash", "xargs", "find":
		return name, true
	}
	return "", false
}

// MultiCall reports whether name (a base name) is a multi-call binary's
// own (busybox, toybox).
func MultiCall(name string) bool { return multiCall(name) }

// DecideApplets decides a start of runner, an applet of a multi-call
// binary that can run the binary's other applets in its own process
// (see AppletRunner), where applets are the applets the binary includes
// (nil when they could not be read: then any name counts as included).
// A rule that denies or asks about a command whose program is one of
// them decides, the stronger first, with a reason naming the applet: a
// command run so is never seen by the exec check, so the rule could not
// hold for it otherwise. Allow when no such rule exists.
func (rs *Rules) DecideApplets(runner string, applets []string) Decision {
	return rs.decideNamed(applets, []string{runner}, func(name string) string {
		if name == "" {
			name = "a command the rule is about"
		}
		return runner + " of a multi-call binary can run " + name + " in its own process, where the exec check cannot see it"
	})
}

// DecidePreload decides a program started with code of the caller's
// choosing loaded into it (how: LD_PRELOAD=… or LD_LIBRARY_PATH=… of its
// environment, the loader's --preload …): that code runs in the program
// and can make it do what a rule is about whatever its arguments say
// (rewrite them, or do it itself). A rule that denies or asks about a
// command of one of the program's names decides, as DecideApplets says;
// Allow when none.
func (rs *Rules) DecidePreload(names, argv, how []string) Decision {
	return rs.decideNamed(names, argv, func(name string) string {
		if name == "" {
			name = "the program"
		}
		return strings.Join(how, " ") + " can load code into " + name + ", which can then do what the rule is about whatever its arguments say"
	})
}

// decideNamed is the strongest rule that denies or asks about a command
// whose program is one of names (nil: any), as command, with the reason
// why(name) gives and the rule's own.
func (rs *Rules) decideNamed(names, command []string, why func(name string) string) Decision {
	d := Decision{Verdict: Allow}
	for _, list := range [][]*rule{rs.policy, rs.builtin} {
		for _, r := range list {
			if r.kind.rank() <= d.Verdict.rank() {
				continue
			}
			if name, ok := r.namesOneOf(names); ok {
				ref := r.ref
				reason := why(name)
				if r.r.Reason != "" {
					reason += " (the rule: " + r.r.Reason + ")"
				}
				d = Decision{Verdict: r.kind, Rule: &ref, Command: command, Reason: reason}
			}
		}
	}
	return d
}

// namesOneOf returns which of applets (nil: any name) a command that r
// matches could have as its program: r's first word, or the literal
// start of its regular expression, decides. A rule whose program cannot
// be told (an unanchored expression, one that begins with a pattern)
// could match a command of any program, and names "" then.
func (r *rule) namesOneOf(applets []string) (string, bool) {
	var can func(string) bool
	switch {
	case r.programs != nil:
		can = func(a string) bool { return slices.Contains(r.programs, a) }
	case len(r.r.Match.Command) > 0:
		pat := r.r.Match.Command[0]
		can = func(a string) bool {
			ok, err := path.Match(pat, a)
			return ok || err != nil
		}
	case r.r.Match.CommandRegex != "":
		prefixes, ok := regexProgramPrefixes(r.r.Match.CommandRegex)
		if !ok {
			return "", true
		}
		can = func(a string) bool {
			for _, prefix := range prefixes {
				if prog, _, spaced := strings.Cut(prefix, " "); spaced && a == prog || !spaced && strings.HasPrefix(a, prefix) {
					return true
				}
			}
			return false
		}
	default:
		return "", false
	}
	if applets == nil {
		// The binary's applets are unknown: a literal program is taken
		// as one of them.
		switch {
		case r.programs != nil:
			return r.programs[0], true
		case len(r.r.Match.Command) > 0:
			return r.r.Match.Command[0], true
		}
		return "", true
	}
	for _, a := range applets {
		if can(a) {
			return a, true
		}
	}
	return "", false
}

// regexProgramPrefixes returns literal texts one of which every command
// a CommandRegex matches begins with (the program's name, or its
// beginning); false when the expression is not anchored at the start of
// the words, or one of its branches begins with no literal: it could
// then match any program.
func regexProgramPrefixes(expr string) ([]string, bool) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, false
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 || re.Sub[0].Op != syntax.OpBeginText {
		return nil, false
	}
	return literalStarts(&syntax.Regexp{Op: syntax.OpConcat, Sub: re.Sub[1:]})
}

// literalStarts returns the literal texts one of which every match of re
// begins with; false when a match may begin otherwise.
func literalStarts(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 || len(re.Rune) == 0 {
			return nil, false
		}
		return []string{string(re.Rune)}, true
	case syntax.OpCapture:
		return literalStarts(re.Sub[0])
	case syntax.OpConcat:
		if len(re.Sub) == 0 {
			return nil, false
		}
		first, ok := literalStarts(re.Sub[0])
		if !ok || len(re.Sub) == 1 || re.Sub[0].Op != syntax.OpLiteral {
			return first, ok
		}
		// A literal followed by more: what follows may lengthen it
		// (git p(?:ush|ull) begins with "git push" or "git pull").
		rest, ok := literalStarts(&syntax.Regexp{Op: syntax.OpConcat, Sub: re.Sub[1:]})
		if !ok {
			return first, true
		}
		out := make([]string, len(rest))
		for i, r := range rest {
			out[i] = first[0] + r
		}
		return out, true
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			s, ok := literalStarts(sub)
			if !ok {
				return nil, false
			}
			out = append(out, s...)
		}
		return out, true
	}
	return nil, false
}
