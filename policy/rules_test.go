package policy

import (
	"strings"
	"testing"
)

func TestRulesLoad(t *testing.T) {
	p, err := Load("testdata/rules.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if len(p.Rules) != 4 || len(p.Harness.Builtin) != 0 {
		t.Fatalf("rules = %+v, builtin = %v", p.Rules, p.Harness.Builtin)
	}
	if got := p.Rules[3].Match; got.Host != "api.stripe.com" || got.Port != 443 || got.Method != "POST" || got.Path != "/v1/charges*" {
		t.Errorf("host rule = %+v", got)
	}
	for i, want := range []struct {
		name string
		line int
	}{{"push", 5}, {"rules[1]", 13}, {"rules[2]", 18}, {"rules[3]", 22}} {
		if p.RuleName(i) != want.name || p.RuleLine(i) != want.line {
			t.Errorf("rule %d: %s line %d, want %s line %d", i, p.RuleName(i), p.RuleLine(i), want.name, want.line)
		}
	}
	// The effective policy renders and reads back with its rules.
	doc, err := p.TOML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("back.toml", doc)
	if err != nil {
		t.Fatalf("Parse(TOML()) = %v\n%s", err, doc)
	}
	if len(back.Rules) != 4 || back.Rules[0].ExamplesMatch[1][0] != "/usr/bin/git" {
		t.Errorf("round trip: %+v", back.Rules)
	}
}

func TestRulesValidate(t *testing.T) {
	p, err := Load("testdata/bad_rules.toml")
	if err != nil {
		t.Fatal(err)
	}
	const f = "testdata/bad_rules.toml"
	checkErrors(t, p.Validate(), []string{
		f + `:3: harness.builtin: unknown built-in rule set "reckless"`,
		f + `:8: rules[0].decision: "maybe" is not one of allow, deny, ask`,
		f + `:11: rules[0].examples_match[1]: the rule does not match its own example ["git" "pull"]`,
		f + `:13: rules[0].examples_not_match[0]: the rule matches its own example ["git" "push" "-f"]`,
		f + `:16: rules[1].match: set exactly one of command, command_regex, write and host`,
		f + `:20: rules[2].match.command_regex: error parsing regexp`,
		f + `:24: rules[3].match.host: "https://api.stripe.com": not a destination`,
		f + `:24: rules[3].match.method: "post" is not an HTTP method`,
		f + `:26: rules[3].examples_match: examples are command lines`,
	})
}

func TestRulesStrict(t *testing.T) {
	_, err := Parse("p.toml", []byte("[[rules]]\ndecision = \"ask\"\nmatch = { command = [\"git\"], argv = [\"x\"] }\nreasons = \"x\"\n"))
	for _, want := range []string{
		`p.toml:3: rules[0].match.argv: unknown key`,
		`p.toml:4: rules[0].reasons: unknown key, did you mean reason?`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse = %v, want %q", err, want)
		}
	}
	p, err := Parse("p.toml", []byte("[[rules]]\ndecision = \"ask\"\nmatch = { command = [\"git\"] }\nexamples_match = [\"git push\"]\n"))
	if err == nil {
		err = p.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), `p.toml:4: rules[0].examples_match[0]: an example is a command line, a list of words: ["git" "push"]`) {
		t.Errorf("Parse(example as a string) = %v", err)
	}
}

func TestMatchCommand(t *testing.T) {
	tests := []struct {
		m    Match
		argv []string
		want bool
	}{
		{Match{Command: []string{"git", "push"}}, []string{"/usr/bin/git", "push", "x"}, true},
		{Match{Command: []string{"git", "push"}}, []string{"git", "pushx"}, false},
		{Match{Command: []string{"git", "push", "-*"}}, []string{"git", "push", "--force"}, true},
		{Match{Command: []string{"git", "push", "-*"}}, []string{"git", "push", "origin"}, false},
		{Match{Command: []string{"*", "publish"}}, []string{"npm", "publish"}, true},
		{Match{CommandRegex: "push"}, []string{"git", "push"}, true},
		{Match{CommandRegex: "^push"}, []string{"git", "push"}, false},
		{Match{CommandRegex: "^git push$"}, []string{"./git", "push"}, true},
		{Match{Host: "x.com"}, []string{"x.com"}, false},
	}
	for _, tt := range tests {
		if got := tt.m.MatchCommand(tt.argv); got != tt.want {
			t.Errorf("%+v.MatchCommand(%q) = %v, want %v", tt.m, tt.argv, got, tt.want)
		}
	}
}

// TestCommandWordsEscapes: a word with a space or a control byte in it
// cannot pass for two words, nor hide the words after it from a pattern;
// a plain command reads as it always has (the positive control).
func TestCommandWordsEscapes(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"/usr/bin/git", "push", "origin"}, "git push origin"},
		{[]string{"git", "-c", "x.y=a\nb", "push"}, `git -c x.y=a\x0ab push`},
		{[]string{"git", "-c", "x.y=a b", "push"}, `git -c x.y=a\x20b push`},
		{[]string{"rm", "-rf", "a\tb\r\x7f\x00", "/tmp/v"}, `rm -rf a\x09b\x0d\x7f\x00 /tmp/v`},
		{[]string{"./my prog", "é"}, `my\x20prog é`},
		{[]string{"echo", ""}, "echo "},
	}
	for _, tt := range tests {
		if got := CommandWords(tt.argv); got != tt.want {
			t.Errorf("CommandWords(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
	// A user's pattern over \S+ words sees the word after one with a
	// newline in it; one for a plain command still matches.
	m := Match{CommandRegex: `^git( -c \S+)* push( |$)`}
	for _, argv := range [][]string{{"git", "push"}, {"git", "-c", "a.b=c", "push"}, {"git", "-c", "x.y=a\nb", "push"}, {"git", "-c", "x.y=a b", "push"}} {
		if !m.MatchCommand(argv) {
			t.Errorf("%q does not match %q", argv, m.CommandRegex)
		}
	}
	if m.MatchCommand([]string{"git", "-c", "x.y=a push", "status"}) {
		t.Error("a word holding \"push\" after a space matched as the word push")
	}
}

// TestRuleTextNoControls: a rule's name and reason, shown to the person
// asked on a terminal, hold no control character: an escape sequence or
// a carriage return there rewrote the prompt's other lines (tried). The
// control: printable text, non-ASCII included, passes.
func TestRuleTextNoControls(t *testing.T) {
	for _, tc := range []struct{ name, reason, want string }{
		{`ok\u001b[2K\rFAKE`, "r", `p.toml:2: rules[0].name: "ok\x1b[2K\rFAKE" holds a control or invisible character (U+001B)`},
		{"ok", `r\nline2`, `p.toml:5: rules[0].reason: "r\nline2" holds a control or invisible character (U+000A)`},
		{`n\u202ex`, "r", `(U+202E)`},
		{"ok", `zero\u200bwidth`, `(U+200B)`},
		{"ok", `a\u2028b`, `(U+2028)`},
		{"déploiement", "sûr — vérifié", ""},
	} {
		src := "[[rules]]\nname = \"" + tc.name + "\"\ndecision = \"ask\"\nmatch = { command = [\"touch\"] }\nreason = \"" + tc.reason + "\"\n"
		p, err := Parse("p.toml", []byte(src))
		if err == nil {
			err = p.Validate()
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q %q: %v, want %q", tc.name, tc.reason, err, tc.want)
		}
	}
}

// TestMissingRuleFieldLocated: a field a rule leaves out (its decision)
// is located at its [[rules]] table; before, the error had no line.
func TestMissingRuleFieldLocated(t *testing.T) {
	p, err := Parse("p.toml", []byte("[limits]\nwall = \"1m\"\n\n[[rules]]\nname = \"a\"\nmatch = { command = [\"git\", \"push\"] }\n"))
	if err == nil {
		err = p.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), `p.toml:4: rules[0].decision:`) {
		t.Errorf("Validate = %v, want the error at line 4", err)
	}
}

// TestRuleWithoutDecision: a rule without decision is told the key is
// missing (it was told "" is not one of allow, deny, ask).
func TestRuleWithoutDecision(t *testing.T) {
	p, err := Parse("r.toml", []byte("[[rules]]\nmatch = { command = [\"rm\"] }\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "r.toml:1: rules[0].decision: missing: say what the rule decides: allow, deny or ask") {
		t.Errorf("Validate = %v", err)
	}
}

// TestCommandRegexWithProgramPath: a command_regex that needs the
// program's word to begin with "/" can never match (the program is its
// base name), and is refused naming the field; the controls pass.
func TestCommandRegexWithProgramPath(t *testing.T) {
	for re, bad := range map[string]bool{`^/(usr/)?bin/ls( |$)`: true, `^/usr/bin/ls`: true, `^ls( |$)`: false, `^(/usr/bin/)?ls`: false, `rm .* /etc`: false} {
		p, err := Parse("r.toml", []byte("[[rules]]\nmatch = { command_regex = '"+re+"' }\ndecision = \"deny\"\n"))
		if err != nil {
			t.Fatal(err)
		}
		err = p.Validate()
		if got := err != nil && strings.Contains(err.Error(), "rules[0].match.command_regex") && strings.Contains(err.Error(), "can never match"); got != bad {
			t.Errorf("%s: %v, want refused %v", re, err, bad)
		}
	}
}

// TestCommandsOf: the options a program reads before its command go,
// with the values of those that take one in the next word (also at the
// end of a group of short options), "--" with them; make's targets are
// each a command, its NAME=value words none; an option kubectl does not
// list is read both ways. The controls: a program not listed, a command
// word reached at once, an option's value that names a command, and make
// -j whose next word is no number.
func TestCommandsOf(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want []string
	}{
		{[]string{"git", "-C", "d", "-c", "a=b", "-P", "--git-dir=.git", "push", "-C"}, []string{"git push -C"}},
		{[]string{"/usr/bin/git", "-Cd", "push"}, []string{"/usr/bin/git push"}},
		{[]string{"git", "-C", "push", "status"}, []string{"git status"}},
		{[]string{"git", "--no-pager", "log", "--grep", "push"}, []string{"git log --grep push"}},
		{[]string{"docker", "--context", "prod", "push", "x"}, []string{"docker push x"}},
		{[]string{"docker", "-Dl", "debug", "push", "x"}, []string{"docker push x"}},
		{[]string{"docker", "--", "push", "x"}, []string{"docker push x"}},
		{[]string{"cargo", "+nightly", "-Z", "x", "--locked", "publish"}, []string{"cargo publish"}},
		{[]string{"make", "-j", "4", "-C", "d", "deploy"}, []string{"make deploy"}},
		{[]string{"make", "-j", "deploy"}, []string{"make deploy"}},
		{[]string{"make", "-sC", "sub", "deploy"}, []string{"make deploy"}},
		{[]string{"make", "all", "X=1", "deploy"}, []string{"make deploy"}},
		{[]string{"make", "X=1", "deploy", "-k", "all"}, []string{"make deploy -k all", "make all"}},
		{[]string{"make", "--", "deploy"}, []string{"make deploy"}},
		{[]string{"npm", "-C", "d", "publish"}, []string{"npm publish"}},
		{[]string{"kubectl", "--log-flush-frequency", "5s", "delete", "pod"}, []string{"kubectl delete pod"}},
		{[]string{"kubectl", "--new-flag", "delete", "pod"}, []string{"kubectl delete pod", "kubectl pod"}},
		{[]string{"kubectl", "--insecure-skip-tls-verify", "delete"}, []string{"kubectl delete"}},
		{[]string{"kubectl", "-n", "delete", "get", "pods"}, []string{"kubectl get pods"}},
		{[]string{"terraform", "-chdir=x", "apply"}, []string{"terraform apply"}},
		{[]string{"git", "push", "-f"}, nil},
		{[]string{"make", "deploy"}, nil},
		{[]string{"rm", "-rf", "x"}, nil},
		{[]string{"git", "-C"}, nil},
	} {
		var got []string
		for _, a := range CommandsOf(tc.argv) {
			got = append(got, strings.Join(a, " "))
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("CommandsOf(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}

// TestExamplesMatchAsTheRuleWill: a deny's examples are matched in every
// spelling the deny takes, so an example it does not match by its words
// alone, yet refuses, is an error; an allow's, as written.
func TestExamplesMatchAsTheRuleWill(t *testing.T) {
	p, err := Parse("p.toml", []byte(`
[[rules]]
match = { command = ["git", "push"] }
decision = "deny"
examples_match = [["git", "-C", ".", "push"]]
examples_not_match = [["git", "-c", "x=y", "push"]]
`))
	if err != nil {
		t.Fatal(err)
	}
	checkErrors(t, p.Validate(), []string{`p.toml:6: rules[0].examples_not_match[0]: the rule matches its own example ["git" "-c" "x=y" "push"]`})
	p, err = Parse("p.toml", []byte(`
[[rules]]
match = { command = ["git", "status"] }
decision = "allow"
examples_not_match = [["git", "-c", "x=y", "status"]]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("control, an allow: %v", err)
	}
}

// TestSpellingsOfARulesPaths: a deny whose own path glob is not clean
// (./secret/*) matches a clean path, and one spelt otherwise, and past a
// program's leading options; the control, another path.
func TestSpellingsOfARulesPaths(t *testing.T) {
	m := Match{Command: []string{"cat", "./secret/*"}}
	for _, argv := range [][]string{{"cat", "secret/key"}, {"cat", "./secret//key"}, {"cat", "x/../secret/key"}} {
		if !m.MatchCommandSpellings(argv) {
			t.Errorf("%q not matched", argv)
		}
	}
	g := Match{Command: []string{"git", "-C", "./repo", "push"}}
	if !g.MatchCommandSpellings([]string{"git", "-C", "repo", "push"}) {
		t.Error("git -C repo push not matched by git -C ./repo push")
	}
	if m.MatchCommandSpellings([]string{"cat", "public/key"}) {
		t.Error("control: cat public/key matched")
	}
}

// TestCloneKeepsRuleLines: a copy of a policy names its rules' lines as
// the policy does (a copy through JSON lost them, and a session's MCP
// asks named a rule without its place). The copy is deep: changing it
// leaves the policy as it was.
func TestCloneKeepsRuleLines(t *testing.T) {
	p, err := Parse("p.toml", []byte("[network]\nmode = \"none\"\n\n[[rules]]\nname = \"env-asks\"\nmatch = { write = \"**/*.env\" }\ndecision = \"ask\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.RuleLine(0) != 4 {
		t.Fatalf("control: the rule's line is %d, want 4", p.RuleLine(0))
	}
	q := p.Clone()
	if q.RuleLine(0) != 4 || q.Source != "p.toml" || q.RuleName(0) != "env-asks" {
		t.Errorf("the copy: line %d, source %q, name %q", q.RuleLine(0), q.Source, q.RuleName(0))
	}
	q.Rules[0].Name = "changed"
	q.Network.Allow = append(q.Network.Allow, "example.com")
	if p.RuleName(0) != "env-asks" || len(p.Network.Allow) != 0 {
		t.Errorf("changing the copy changed the policy: %q %q", p.RuleName(0), p.Network.Allow)
	}
}
