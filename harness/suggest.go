package harness

import (
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moatbox/moat/internal/netrule"
)

// Record is what Suggest reads of an audit record: a decision of the rules
// (type "decision": Command, Decided, Verdict, Rule, Outcome, At) or an
// event of the egress proxy (type "network": Host, Port, Decision, Rule).
// Other records are skipped; Count is a "dropped" record's, which callers
// tell the person of (what was dropped is missing from the suggestions).
type Record struct {
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	RunID    string    `json:"run_id"`
	Command  []string  `json:"command"`
	Decided  []string  `json:"decided"`
	Verdict  string    `json:"verdict"`
	Rule     string    `json:"rule"`
	Outcome  string    `json:"outcome"`
	At       string    `json:"at"`
	Host     string    `json:"host"`
	Port     int       `json:"port"`
	Decision string    `json:"decision"`
	Reason   string    `json:"reason"`
	Count    int       `json:"count"`
}

// egressRuleLocalName is egress.RuleLocalName, the rule of a refused
// single-label name (harness does not import egress): its reason reads
// "NAME resolves to ADDR, which …".
const egressRuleLocalName = "single-label name outside allow_cidrs"

// localNameAddr is the address an egressRuleLocalName refusal names.
func localNameAddr(reason string) (netip.Addr, bool) {
	_, rest, ok := strings.Cut(reason, " resolves to ")
	if !ok {
		return netip.Addr{}, false
	}
	s, _, _ := strings.Cut(rest, ",")
	a, err := netip.ParseAddr(s)
	return a.Unmap(), err == nil
}

// Suggestion is one addition to a policy that would have let through
// what the records show was refused or asked about, with the records that
// justify it. It is for a person to review: nothing applies it.
type Suggestion struct {
	// Kind is "network.allow" (Entry is the entry, a host name and
	// port), "network.allow_cidrs" (Entry is the single address an IP
	// destination was, which network.allow refuses), "rule" (Entry is a
	// [[rules]] table allowing a command prefix, for what a built-in set
	// decided), "change" (Entry names the policy's own rule that
	// decided: an allow rule beside it would not win, so the person
	// changes or narrows it) or "note" (Entry says why a refused
	// destination has no entry that a policy would accept).
	Kind  string
	Entry string
	// Because lists the records behind it, one line each, oldest first.
	Because []string
}

// maxBecause bounds the records quoted for one suggestion.
const maxBecause = 5

// Suggest turns records into the fewest additions that cover them: one
// network.allow entry per host name and port the proxy refused by default,
// one allow_cidrs address per public IP address it refused so (never one
// for an address refused as private: that guard is not a policy gap; a
// destination no entry could name gets a note instead), one allow rule per command prefix (the program and, unless it
// is an option, its first word) that a built-in set denied or asked about
// without an approval, and one note per rule of the policy's own that did.
// A deny is suggested like an ask: the person reviewing decides.
func Suggest(recs []Record) []Suggestion {
	var out []Suggestion
	index := map[string]int{}
	add := func(kind, entry, because string) {
		k := kind + "\x00" + entry
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, Suggestion{Kind: kind, Entry: entry})
		}
		if len(out[i].Because) < maxBecause {
			out[i].Because = append(out[i].Because, because)
		} else if len(out[i].Because) == maxBecause {
			out[i].Because = append(out[i].Because, "…")
		}
	}
	for _, r := range recs {
		when := r.Time.UTC().Format(time.RFC3339)
		switch {
		case r.Type == "network" && r.Decision == "deny" && r.Rule == "default deny" && r.Host != "":
			host := strings.TrimSuffix(strings.TrimPrefix(r.Host, "["), "]")
			if a, ok := netrule.ParseIPLiteral(host); ok {
				// Host entries match names only: an address is allowed
				// by allow_cidrs, the remedy the proxy's refusal names.
				a = a.Unmap()
				dest := netip.AddrPortFrom(a, uint16(r.Port)).String()
				because := fmt.Sprintf("%s run %s: a connection to %s was refused (default deny)", when, r.RunID, dest)
				if !a.IsGlobalUnicast() || a.IsPrivate() {
					// The proxy refuses such an address as private, not
					// by default: no allow entry is a gap it fills.
					add("note", fmt.Sprintf("%s is not a public address: allow_cidrs would open the host's own or private network to the command; none is suggested", a), because)
					continue
				}
				add("network.allow_cidrs", netip.PrefixFrom(a, a.BitLen()).String(), because+"; allow_cidrs admits every port of the address")
				continue
			}
			entry := host + ":" + strconv.Itoa(r.Port)
			because := fmt.Sprintf("%s run %s: a connection to %s was refused (default deny)", when, r.RunID, entry)
			if _, err := netrule.ParseHost(entry, true); err != nil {
				add("note", fmt.Sprintf("%q is no network.allow entry (%v); none is suggested", entry, err), because)
				continue
			}
			add("network.allow", entry, because)
			if !strings.Contains(host, ".") {
				// The proxy refuses the entry next at addresses that
				// allow_cidrs does not list, which the record does
				// not name: a run with the entry shows them.
				add("note", fmt.Sprintf("%s is a single-label name: besides the allow entry, [network] allow_cidrs must list the addresses it resolves to (a run with the entry names them)", host), because)
			}
		case r.Type == "network" && r.Decision == "deny" && r.Rule == egressRuleLocalName && r.Host != "":
			because := fmt.Sprintf("%s run %s: a connection to %s:%d was refused (%s)", when, r.RunID, r.Host, r.Port, r.Rule)
			a, ok := localNameAddr(r.Reason)
			if !ok {
				add("note", fmt.Sprintf("%s is a single-label name: [network] allow_cidrs must list the addresses it resolves to", r.Host), because)
				continue
			}
			entry := netip.PrefixFrom(a, a.BitLen()).String()
			if !a.IsGlobalUnicast() || a.IsPrivate() {
				// What a command can name (a metadata service, the
				// intranet, the host's loopback) is no entry printed to
				// copy: a note says what would open it, and how much.
				add("note", fmt.Sprintf("%s resolves to %s, not a public address: allow_cidrs = [%q] would open every port of it to the command (the host's own or private network); none is suggested", r.Host, a, entry), because)
				continue
			}
			add("network.allow_cidrs", entry, because+"; allow_cidrs admits every port of the address")
		case r.Type == "decision" && (r.Verdict == "deny" || r.Verdict == "ask") && r.Outcome != "approved":
			cmd := r.Decided
			if len(cmd) == 0 {
				cmd = r.Command
			}
			prefix := commandPrefix(cmd)
			if prefix == nil {
				continue
			}
			where := "the command line"
			if r.At != "" {
				where = "a program started (" + r.At + ")"
			}
			outcome := r.Outcome
			if outcome == "" {
				outcome = "refused"
			}
			because := fmt.Sprintf("%s run %s: %s %q: %s by %s (%s)", when, r.RunID, where, cmd, r.Verdict, r.Rule, outcome)
			if r.Rule == "" {
				// No rule decided it: moat's own check did (a line that
				// hides what it runs), which no rule can allow.
				add("note", fmt.Sprintf("%q was refused by moat's own check, not by a rule: no rule allows it; run what it runs by its name", cmd), because)
				continue
			}
			if strings.Contains(r.Rule, "/") && !strings.Contains(r.Rule, "(") {
				add("rule", ruleTOML(prefix), because) // a built-in set's: the policy's own rules come first
			} else {
				add("change", r.Rule, because) // the policy's own: an allow beside it would not win
			}
		}
	}
	return out
}

// commandPrefix is the words an allow rule for cmd matches: its program by
// base name and, unless it is an option, the word after it.
func commandPrefix(cmd []string) []string {
	if len(cmd) == 0 || cmd[0] == "" {
		return nil
	}
	p := []string{path.Base(cmd[0])}
	if strings.ContainsAny(p[0], globChars) || strings.HasPrefix(p[0], "-") {
		// A rule's words are patterns: "*" as a program would allow
		// every command (an audit stream anyone could have written
		// proposed it, found by a tester).
		return nil
	}
	if len(cmd) > 1 && cmd[1] != "" && !strings.HasPrefix(cmd[1], "-") && !strings.ContainsAny(cmd[1], globChars) {
		p = append(p, cmd[1])
	}
	return p
}

// globChars are those a rule's command words read as a pattern.
const globChars = "*?[\\"

func ruleTOML(prefix []string) string {
	q := make([]string, len(prefix))
	for i, w := range prefix {
		q[i] = strconv.Quote(w)
	}
	name := "allow-" + strings.Join(slices.Clone(prefix), "-")
	return fmt.Sprintf("[[rules]]\nname = %s\nmatch = { command = [%s] }\ndecision = \"allow\"\nexamples_match = [[%s]]", strconv.Quote(name), strings.Join(q, ", "), strings.Join(q, ", "))
}
