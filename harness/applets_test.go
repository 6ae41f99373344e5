package harness

import "testing"

func TestAppletRunner(t *testing.T) {
	tests := []struct {
		argv    []string
		isMulti bool
		want    string
	}{
		{[]string{"busybox", "sh", "-c", "x"}, true, "sh"},
		{[]string{"busybox", "ash"}, false, "ash"},
		{[]string{"/bin/busybox", "xargs", "rm"}, true, "xargs"},
		// A link named sh to busybox, a login shell.
		{[]string{"sh", "-c", "x"}, true, "sh"},
		{[]string{"-sh"}, true, "sh"},
		// Positive controls: an applet that runs nothing, busybox alone,
		// and a shell that is no multi-call binary.
		{[]string{"busybox", "wget", "x"}, true, ""},
		{[]string{"busybox", "--list"}, true, ""},
		{[]string{"sh", "-c", "x"}, false, ""},
	}
	for _, tt := range tests {
		got, ok := AppletRunner(tt.argv, tt.isMulti)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("AppletRunner(%q, %v) = %q, %v; want %q", tt.argv, tt.isMulti, got, ok, tt.want)
		}
	}
}

func TestDecideApplets(t *testing.T) {
	rs := New(mustPolicy(t, `
[harness]
builtin = []

[[rules]]
name = "no-wget"
match = { command = ["wget"] }
decision = "deny"

[[rules]]
name = "ask-curl"
match = { command_regex = "^(curl|xh) " }
decision = "ask"

[[rules]]
name = "allow-ls"
match = { command = ["ls"] }
decision = "allow"
`))
	tests := []struct {
		applets []string
		verdict Verdict
		rule    string
	}{
		{[]string{"ls", "sh", "wget"}, Deny, "no-wget"},
		{[]string{"ls", "sh", "curl"}, Ask, "ask-curl"},
		{nil, Deny, "no-wget"},
		// Positive control: a binary with none of the rules' programs.
		{[]string{"ls", "sh", "cat"}, Allow, ""},
	}
	for _, tt := range tests {
		d := rs.DecideApplets("sh", tt.applets)
		rule := ""
		if d.Rule != nil {
			rule = d.Rule.Name
		}
		if d.Verdict != tt.verdict || rule != tt.rule {
			t.Errorf("DecideApplets(%q) = %s by %q (%s), want %s by %q", tt.applets, d.Verdict, rule, d.Reason, tt.verdict, tt.rule)
		}
	}
	// A rule whose program cannot be told names every applet.
	any := New(mustPolicy(t, `
[harness]
builtin = []

[[rules]]
name = "no-force"
match = { command_regex = "--force" }
decision = "deny"
`))
	if d := any.DecideApplets("sh", []string{"ls"}); d.Verdict != Deny {
		t.Errorf("an unanchored expression: %s, want deny", d.Verdict)
	}
}

func TestRegexProgramPrefixes(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{"^wget", []string{"wget"}},
		{"^wget .*", []string{"wget "}},
		{"^git p(ush|ull)", []string{"git push", "git pull"}},
		{"^(curl|wget)", []string{"curl", "wget"}},
		{"wget", nil},
		{"(?i)^wget", nil},
		{"^.*wget", nil},
	}
	for _, tt := range tests {
		got, ok := regexProgramPrefixes(tt.expr)
		if ok != (tt.want != nil) || len(got) != len(tt.want) {
			t.Errorf("regexProgramPrefixes(%q) = %q, %v; want %q", tt.expr, got, ok, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("regexProgramPrefixes(%q) = %q; want %q", tt.expr, got, tt.want)
			}
		}
	}
}
