package egress

import (
	"strings"
	"testing"
)

// TestEventHostPrintable: a SOCKS5 destination that is no host name, with
// a terminal control sequence in it, is recorded quoted, and the
// Summary a person reads has no control byte; the control is a valid
// refused name, recorded as it is.
func TestEventHostPrintable(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	var sum Summary
	for _, c := range []struct{ host, want string }{
		{"denied.test", "denied.test"},
		{"\x1b]0;owned\x07\x1b[2J.test", `"\x1b]0;owned\a\x1b[2J.test"`},
		{"caf\xc3\xa9\n.test", `"caf\u00e9\n.test"`},
	} {
		if _, rep := tp.socks(t, socksAtypDomain, []byte(c.host), s.httpPort); rep != socksNotAllowed {
			t.Errorf("%q: reply %d, want 2", c.host, rep)
		}
		e := tp.event(t)
		if e.Host != c.want || e.Decision != DecisionDeny {
			t.Errorf("%q: event host %q (%s), want %q", c.host, e.Host, e.Decision, c.want)
		}
		sum.Add(e)
	}
	line := sum.String()
	if strings.ContainsAny(line, "\x1b\x07\n") || !strings.Contains(line, "denied.test:") {
		t.Errorf("summary %q", line)
	}
}
