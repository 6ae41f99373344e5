package harness

import (
	"strings"
	"testing"

	"github.com/moatbox/moat/policy"
)

func TestSuggest(t *testing.T) {
	recs := []Record{
		{Type: "decision", RunID: "r1", Command: []string{"sh", "s.sh"}, Decided: []string{"git", "push", "origin"}, Verdict: "ask", Rule: "irreversible/git-push", Outcome: "learn", At: "exec"},
		{Type: "decision", RunID: "r2", Command: []string{"git", "push"}, Decided: []string{"git", "push"}, Verdict: "ask", Rule: "irreversible/git-push", Outcome: "no approver"},
		{Type: "decision", RunID: "r2", Command: []string{"git", "push"}, Verdict: "ask", Rule: "irreversible/git-push", Outcome: "approved"},
		{Type: "decision", RunID: "r3", Command: []string{"/bin/rm", "-rf", "/x"}, Verdict: "deny", Rule: "no-rm", Outcome: ""},
		{Type: "network", RunID: "r1", Host: "pypi.org", Port: 443, Decision: "deny", Rule: "default deny"},
		{Type: "network", RunID: "r1", Host: "pypi.org", Port: 443, Decision: "deny", Rule: "default deny"},
		{Type: "network", RunID: "r1", Host: "10.0.0.1", Port: 80, Decision: "deny", Rule: "private address 10.0.0.1 (RFC 1918)"},
		{Type: "network", RunID: "r1", Host: "ok.test", Port: 443, Decision: "allow", Rule: "ok.test"},
		{Type: "run", RunID: "r1"},
	}
	got := Suggest(recs)
	if len(got) != 3 {
		t.Fatalf("%d suggestions: %+v", len(got), got)
	}
	if got[0].Kind != "rule" || !strings.Contains(got[0].Entry, `command = ["git", "push"]`) || len(got[0].Because) != 2 {
		t.Errorf("git push: %+v", got[0])
	}
	if got[1].Kind != "change" || got[1].Entry != "no-rm" {
		t.Errorf("rm: %+v", got[1])
	}
	if got[2].Kind != "network.allow" || got[2].Entry != "pypi.org:443" || len(got[2].Because) != 2 {
		t.Errorf("pypi: %+v", got[2])
	}
	// Each suggested rule is a valid policy whose example it matches.
	for _, s := range got[:1] {
		p, err := policy.Parse("s.toml", []byte(s.Entry+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", s.Entry, err)
		}
	}
}

// TestSuggestNoPatterns: a decided command whose words a rule would read
// as patterns gets no rule (a forged stream's "*" was suggested as an
// allow of every command, and "[a-z]*" as a rule that failed its own
// example; found by a tester), nor does a refusal no rule made, which no
// rule can undo (it was called the policy's own rule). The control: the
// same stream's plain command gets its rule.
func TestSuggestNoPatterns(t *testing.T) {
	recs := []Record{
		{Type: "decision", RunID: "r1", Decided: []string{"*"}, Verdict: "ask", Rule: "irreversible/git-push"},
		{Type: "decision", RunID: "r1", Decided: []string{"/a/[a-z]*", "-x"}, Verdict: "ask", Rule: "irreversible/git-push"},
		{Type: "decision", RunID: "r1", Decided: []string{"g\\it", "push"}, Verdict: "ask", Rule: "irreversible/git-push"},
		{Type: "decision", RunID: "r1", Decided: []string{"sh", "-c", "/usr/bin/gi? push"}, Verdict: "ask", Rule: ""},
		{Type: "decision", RunID: "r1", Decided: []string{"npm", "publish"}, Verdict: "ask", Rule: "irreversible/npm-publish"},
	}
	got := Suggest(recs)
	var rules []string
	for _, s := range got {
		switch s.Kind {
		case "rule":
			rules = append(rules, s.Entry)
		case "change":
			t.Errorf("a change of the policy's own rule %q for a refusal no rule made", s.Entry)
		}
	}
	if len(rules) != 1 || !strings.Contains(rules[0], `command = ["npm", "publish"]`) {
		t.Errorf("rules %q, want npm publish's alone", rules)
	}
}

// TestSuggestSingleLabelName: a single-label name needs allow_cidrs too,
// which the suggestion of its allow entry says; a refusal of it at an
// address allow_cidrs does not list suggests that address, from the
// proxy's own reason, when it is public, and says what would open it
// otherwise. The control: a dotted name gets its entry alone.
func TestSuggestSingleLabelName(t *testing.T) {
	recs := []Record{
		{Type: "network", RunID: "r1", Host: "db", Port: 5432, Decision: "deny", Rule: "default deny"},
		{Type: "network", RunID: "r1", Host: "pypi.org", Port: 443, Decision: "deny", Rule: "default deny"},
		{Type: "network", RunID: "r2", Host: "localhost", Port: 8080, Decision: "deny", Rule: egressRuleLocalName,
			Reason: `localhost resolves to 127.0.0.1, which [network] allow_cidrs does not list: a single-label name (a local service) is reachable only at the addresses allow_cidrs lists; to allow it, add its range (e.g. "127.0.0.1/32") to [network] allow_cidrs`},
		{Type: "network", RunID: "r2", Host: "cache", Port: 6379, Decision: "deny", Rule: egressRuleLocalName, Reason: "cache resolves to ::ffff:172.18.0.3, which …"},
		{Type: "network", RunID: "r2", Host: "metadata", Port: 80, Decision: "deny", Rule: egressRuleLocalName, Reason: "metadata resolves to 169.254.169.254, which …"},
		{Type: "network", RunID: "r2", Host: "api", Port: 443, Decision: "deny", Rule: egressRuleLocalName, Reason: "api resolves to 8.8.4.4, which …"},
	}
	var got []string
	for _, s := range Suggest(recs) {
		got = append(got, s.Kind+" "+s.Entry)
	}
	// A private, loopback or link-local address is a note, never an
	// entry to copy (a command could steer a learn run to the metadata
	// service; found by a reviewer); a public one is an entry.
	want := []string{
		"network.allow db:5432",
		"note db is a single-label name: besides the allow entry, [network] allow_cidrs must list the addresses it resolves to (a run with the entry names them)",
		"network.allow pypi.org:443",
		`note localhost resolves to 127.0.0.1, not a public address: allow_cidrs = ["127.0.0.1/32"] would open every port of it to the command (the host's own or private network); none is suggested`,
		`note cache resolves to 172.18.0.3, not a public address: allow_cidrs = ["172.18.0.3/32"] would open every port of it to the command (the host's own or private network); none is suggested`,
		`note metadata resolves to 169.254.169.254, not a public address: allow_cidrs = ["169.254.169.254/32"] would open every port of it to the command (the host's own or private network); none is suggested`,
		"network.allow_cidrs 8.8.4.4/32",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("suggestions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
