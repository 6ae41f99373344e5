package harness

import (
	"testing"

	"github.com/moatbox/moat/policy"
)

func TestDecideWrite(t *testing.T) {
	p, err := policy.Parse("p.toml", []byte(`
[[rules]]
name = "docs-ok"
match = { write = "docs/**" }
decision = "allow"

[[rules]]
name = "deploy-asks"
match = { write = "deploy/**" }
decision = "ask"
reason = "deploy files go live"

[[rules]]
name = "no-env"
match = { write = "**/*.env" }
decision = "deny"
reason = "secrets stay out"
examples_match = ["deploy/prod.env", ".env"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	rs := New(p)
	for _, tt := range []struct {
		path, rule string
		want       Verdict
	}{
		{"src/main.go", "", Allow},
		{"docs/a.md", "docs-ok", Allow},
		{"deploy/app.yaml", "deploy-asks", Ask},
		{"deploy/prod.env", "no-env", Deny}, // deny beats ask
		{"./deploy/../x.env", "no-env", Deny},
	} {
		d := rs.DecideWrite(tt.path)
		name := ""
		if d.Rule != nil {
			name = d.Rule.Name
		}
		if d.Verdict != tt.want || name != tt.rule {
			t.Errorf("DecideWrite(%q) = %s by %q, want %s by %q", tt.path, d.Verdict, name, tt.want, tt.rule)
		}
	}
	if d := rs.DecideWrites("link/app.yaml", "deploy/app.yaml"); d.Verdict != Ask {
		t.Errorf("a write through a link to deploy/: %+v", d)
	}
	if d := rs.DecideWrite("src/main.go"); d.Rule != nil || !rs.HasWriteRules() {
		t.Errorf("no rule: %+v", d)
	}
	// Write rules say nothing about commands, nor command rules about writes.
	if d := rs.Decide(Action{Argv: []string{"deploy/prod.env"}}); d.Verdict != Allow {
		t.Errorf("a write rule decided a command: %+v", d)
	}
}
