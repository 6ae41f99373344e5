package policy

import (
	"strings"
	"testing"
)

func TestMatchWrite(t *testing.T) {
	for _, tt := range []struct {
		glob string
		yes  []string
		no   []string
	}{
		{"src/**", []string{"src", "src/a.go", "src/a/b/c.go"}, []string{"srcx", "lib/src/a.go", "."}},
		{"*.env", []string{".env", "prod.env"}, []string{"cfg/prod.env", "env"}},
		{"**/*.env", []string{"prod.env", "a/b/prod.env"}, []string{"a/b/env"}},
		{"deploy/**/secrets/*", []string{"deploy/secrets/k", "deploy/a/b/secrets/k"}, []string{"deploy/secrets", "deploy/a/secrets/k/l"}},
		{"**/**", []string{"a", "a/b"}, nil},
		{"Makefile", []string{"Makefile", "./Makefile"}, []string{"a/Makefile"}},
		{"**/a/**/b", []string{"a/b", "x/a/y/z/b", "a/a/b"}, []string{"a", "b/a", "a/b/c"}},
		// A tenant's: many "**" against a long path it also chose took
		// time exponential in them (this one: hours); now linear.
		{strings.Repeat("**/a/", 12) + "**/b", []string{strings.Repeat("a/", 12) + "b"}, []string{strings.Repeat("a/", 60) + "c"}},
	} {
		m := Match{Write: tt.glob}
		for _, p := range tt.yes {
			if !m.MatchWrite(p) {
				t.Errorf("%q does not match %q", tt.glob, p)
			}
		}
		for _, p := range tt.no {
			if m.MatchWrite(p) {
				t.Errorf("%q matches %q", tt.glob, p)
			}
		}
	}
}

// TestWriteRuleExamples: a write rule's examples are paths, checked at
// load; one it gets wrong, or one that is not a path of the workspace, is
// an error naming the example by file:line.
func TestWriteRuleExamples(t *testing.T) {
	good := `[[rules]]
match = { write = "deploy/**" }
decision = "ask"
examples_match = ["deploy/prod.yaml", ["deploy"]]
examples_not_match = ["src/deploy/x"]
`
	p, err := Parse("p.toml", []byte(good))
	if err == nil {
		err = p.Validate()
	}
	if err != nil {
		t.Fatalf("good rule: %v", err)
	}
	bad := `[[rules]]
match = { write = "deploy/**" }
decision = "deny"
examples_match = ["src/a.go", "/etc/passwd", ["a", "b"]]
examples_not_match = ["deploy/x"]
`
	p, err = Parse("p.toml", []byte(bad))
	if err == nil {
		err = p.Validate()
	}
	if err == nil {
		t.Fatal("a write rule that misses its examples loads")
	}
	for _, want := range []string{
		`p.toml:4: rules[0].examples_match[0]: the rule does not match its own example "src/a.go"`,
		`rules[0].examples_match[1]: "/etc/passwd": an example path is relative`,
		"rules[0].examples_match[2]: an example of a write rule is one path",
		`p.toml:5: rules[0].examples_not_match[0]: the rule matches its own example "deploy/x"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
	if _, err := Parse("p.toml", []byte("[[rules]]\nmatch = { write = \"src/[\" }\ndecision = \"deny\"\n")); err == nil {
		p, _ := Parse("p.toml", []byte("[[rules]]\nmatch = { write = \"src/[\" }\ndecision = \"deny\"\n"))
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "not a valid glob") {
			t.Errorf("an invalid glob: %v", err)
		}
	}
}
