//go:build linux

package egress

import (
	"fmt"
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// TestTUNAnswers: moat's resolver gives an allowed name one address of
// Names for the run, no records of other types, and NXDOMAIN to a refused
// name; every query is an event.
func TestTUNAnswers(t *testing.T) {
	rules, err := ParseRules([]string{"allowed.test", "api.test:443", "*.wild.test"}, []string{"no.wild.test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	p := &Proxy{Rules: rules, Audit: func(e Event) { events = append(events, e) }}
	ts := &tunStack{p: p, cfg: TUNConfig{MTU: 1500, DNS: netip.MustParseAddr("198.18.0.2"), Names: netip.MustParsePrefix("198.19.0.0/16")},
		byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{}, next: netip.MustParseAddr("198.19.0.1")}
	ask := func(name string, typ dnsmessage.Type) dnsmessage.Message {
		t.Helper()
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET})
		q, _ := b.Finish()
		var m dnsmessage.Message
		if err := m.Unpack(ts.answer(q)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.ID != 7 || !m.Response {
			t.Fatalf("%s: header %+v", name, m.Header)
		}
		return m
	}
	a := func(m dnsmessage.Message) string {
		if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 {
			return m.RCode.String()
		}
		return netip.AddrFrom4(m.Answers[0].Body.(*dnsmessage.AResource).A).String()
	}
	for _, c := range []struct {
		name string
		typ  dnsmessage.Type
		want string
	}{
		{"allowed.test.", dnsmessage.TypeA, "198.19.0.1"},
		{"API.test.", dnsmessage.TypeA, "198.19.0.2"},     // allowed on one port: it resolves
		{"allowed.test.", dnsmessage.TypeA, "198.19.0.1"}, // the same address again
		{"x.wild.test.", dnsmessage.TypeA, "198.19.0.3"},
		{"no.wild.test.", dnsmessage.TypeA, "RCodeNameError"},
		{"denied.test.", dnsmessage.TypeA, "RCodeNameError"},
		{"wild.test.", dnsmessage.TypeA, "RCodeNameError"},
		{"denied.test.", dnsmessage.TypeAAAA, "RCodeNameError"},
		{"allowed.test.", dnsmessage.TypeAAAA, "RCodeSuccess"}, // no records
		{"allowed.test.", dnsmessage.TypeTXT, "RCodeSuccess"},
	} {
		if got := a(ask(c.name, c.typ)); got != c.want {
			t.Errorf("%s %v: %s, want %s", c.name, c.typ, got, c.want)
		}
	}
	if n, ok := ts.nameOf(netip.MustParseAddr("198.19.0.2")); !ok || n != "api.test" {
		t.Errorf("198.19.0.2 stands for %q %v", n, ok)
	}
	if len(events) != 10 || events[5].Decision != DecisionDeny || events[5].Rule != RuleDefaultDeny || events[0].Decision != DecisionAllow {
		t.Errorf("events: %+v", events)
	}
	// A name that is no host name, with a terminal control sequence in
	// it, is refused and recorded quoted; an international name is
	// recorded and given its address in its ASCII form.
	events = nil
	if got := a(ask("\x1b[2J\x1b]0;owned\x07.test.", dnsmessage.TypeA)); got != "RCodeNameError" {
		t.Errorf("a name with control bytes: %s", got)
	}
	if got := a(ask("b\xc3\xbccher.wild.test.", dnsmessage.TypeA)); got != "198.19.0.4" {
		t.Errorf("an international name: %s", got)
	}
	if len(events) != 2 || events[0].Host != `"\x1b[2j\x1b]0;owned\a.test"` || events[1].Host != "xn--bcher-kva.wild.test" {
		t.Errorf("events: %+v", events)
	}
	if n, ok := ts.nameOf(netip.MustParseAddr("198.19.0.4")); !ok || n != "xn--bcher-kva.wild.test" {
		t.Errorf("198.19.0.4 stands for %q %v", n, ok)
	}
	// Two questions: neither is answered (nor decided); the control is
	// the first alone, answered above.
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 8})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("allowed.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("denied.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	var m dnsmessage.Message
	events = nil
	if err := m.Unpack(ts.answer(q)); err != nil || m.RCode != dnsmessage.RCodeFormatError || len(m.Answers) != 0 || len(events) != 0 {
		t.Errorf("two questions: %v %+v, events %+v", err, m, events)
	}
	if ts.answer([]byte{1, 2, 3}) != nil {
		t.Error("an answer to garbage")
	}
}

// TestTUNNamesExhausted: when Names has no address left, a new name gets
// SERVFAIL (an error event) and no address is given twice: the names
// that have one keep it, and each address stands for its first name
// only. The control: the first names get addresses.
func TestTUNNamesExhausted(t *testing.T) {
	rules, err := ParseRules([]string{"*.wild.test"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	p := &Proxy{Rules: rules, Audit: func(e Event) { events = append(events, e) }}
	ts := &tunStack{p: p, cfg: TUNConfig{MTU: 1500, DNS: netip.MustParseAddr("198.18.0.2"), Names: netip.MustParsePrefix("198.19.0.0/29")},
		byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{}, next: netip.MustParseAddr("198.19.0.1")}
	ask := func(name string) dnsmessage.Message {
		t.Helper()
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		q, _ := b.Finish()
		var m dnsmessage.Message
		if err := m.Unpack(ts.answer(q)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return m
	}
	seen := map[netip.Addr]string{}
	for i := range 10 {
		name := fmt.Sprintf("n%d.wild.test", i)
		m := ask(name + ".")
		if i < 6 { // 198.19.0.1 to .6; .7 is the prefix's broadcast address
			if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 {
				t.Fatalf("%s: %v, %d answers", name, m.RCode, len(m.Answers))
			}
			a := netip.AddrFrom4(m.Answers[0].Body.(*dnsmessage.AResource).A)
			if prev, ok := seen[a]; ok {
				t.Fatalf("%s got %s, already %s's", name, a, prev)
			}
			seen[a] = name
			continue
		}
		if m.RCode != dnsmessage.RCodeServerFailure || len(m.Answers) != 0 || events[len(events)-1].Decision != DecisionError {
			t.Errorf("%s, with Names exhausted: %v, %d answers, event %+v", name, m.RCode, len(m.Answers), events[len(events)-1])
		}
	}
	for a, name := range seen {
		if n, ok := ts.nameOf(a); !ok || n != name {
			t.Errorf("%s stands for %q, want %q", a, n, name)
		}
		if m := ask(name + "."); len(m.Answers) != 1 || netip.AddrFrom4(m.Answers[0].Body.(*dnsmessage.AResource).A) != a {
			t.Errorf("%s asked again: %+v", name, m)
		}
	}
}

// TestTUNRefusesPlaceholderName: moat's resolver answers NXDOMAIN to a
// name with a secret's placeholder in it, which a wildcard allows (the
// query would take the placeholder out, and the connection after it),
// and records the refusal; the control, another name under the same
// wildcard, gets its address.
func TestTUNRefusesPlaceholderName(t *testing.T) {
	rules, err := ParseRules([]string{"*.wild.test"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	secs, err := NewSecrets([]Secret{{Name: "TOKEN", Placeholder: NewPlaceholder("TOKEN"), Value: "v", Hosts: []string{"api.test"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	p := &Proxy{Rules: rules, Secrets: secs, Audit: func(e Event) { events = append(events, e) }}
	ts := &tunStack{p: p, cfg: TUNConfig{MTU: 1500, DNS: netip.MustParseAddr("198.18.0.2"), Names: netip.MustParsePrefix("198.19.0.0/16")},
		byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{}, next: netip.MustParseAddr("198.19.0.1")}
	for _, c := range []struct {
		name string
		want dnsmessage.RCode
	}{
		{secs.list[0].Placeholder + ".wild.test.", dnsmessage.RCodeNameError},
		// A fullwidth first letter, which IDNA maps to the placeholder's.
		{"\uff4d" + secs.list[0].Placeholder[1:] + ".wild.test.", dnsmessage.RCodeNameError},
		{"ok.wild.test.", dnsmessage.RCodeSuccess},
	} {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(c.name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		q, _ := b.Finish()
		var m dnsmessage.Message
		if err := m.Unpack(ts.answer(q)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if m.RCode != c.want {
			t.Errorf("%s: %v, want %v", c.name, m.RCode, c.want)
		}
	}
	if len(events) != 3 || events[0].Decision != DecisionDeny || events[0].Rule != "secret placeholder" ||
		events[1].Decision != DecisionDeny || events[1].Rule != "secret placeholder" || events[2].Decision != DecisionAllow {
		t.Errorf("events: %+v", events)
	}
}
