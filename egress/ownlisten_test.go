package egress

import (
	"fmt"
	"net/netip"
	"strconv"
	"testing"
)

// TestOwnListenerRefused: a listener moat serves itself on (the daemon's
// API) is refused to every proxy of the process, even with allow_cidrs
// listing loopback, at its address and at the other spellings of
// loopback; nothing is dialed. The controls: another server on loopback
// through the same proxy, and the listener itself once given back.
func TestOwnListenerRefused(t *testing.T) {
	s := startServers(t)
	own := startServers(t) // stands in for the daemon's --listen
	done := RefuseListener(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(own.httpPort)))
	defer done()
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, append([]string{"::1/128"}, loopbackCIDR...)))

	for _, host := range []string{"allowed.test", "127.0.0.1", "127.0.0.2", "[::1]", "[::ffff:127.0.0.1]"} {
		target := host + ":" + strconv.Itoa(own.httpPort)
		resp, body := tp.get(t, "http://"+target+"/", target)
		if resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != RuleOwnListener {
			t.Errorf("GET %s: %d %q %s, want 403 %q", target, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), body, RuleOwnListener)
		}
		wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, RuleOwnListener)
		c, resp := tp.connect(t, target)
		if c != nil || resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != RuleOwnListener {
			t.Errorf("CONNECT %s: %d, want 403 %q", target, resp.StatusCode, RuleOwnListener)
		}
		if c != nil {
			c.Close()
		}
		wantEvent(t, tp.event(t), ProtoConnect, DecisionDeny, RuleOwnListener)
	}
	if d := tp.dials(); len(d) != 0 {
		t.Errorf("dialed %v", d)
	}

	// Another loopback server: allow_cidrs lets it through.
	other := fmt.Sprintf("allowed.test:%d", s.httpPort)
	if resp, body := tp.get(t, "http://"+other+"/", other); resp.StatusCode != 200 {
		t.Errorf("GET %s: %d %s", other, resp.StatusCode, body)
	}
	wantEvent(t, tp.event(t), ProtoHTTP, DecisionAllow, "allowed.test")
	// The listener given back is reachable as any loopback server.
	done()
	target := "127.0.0.1:" + strconv.Itoa(own.httpPort)
	if resp, body := tp.get(t, "http://"+target+"/", target); resp.StatusCode != 200 {
		t.Errorf("GET %s once given back: %d %s", target, resp.StatusCode, body)
	}
}

// TestOwnListenerAddresses: which addresses lead to a listener, by where
// it listens.
func TestOwnListenerAddresses(t *testing.T) {
	host := []netip.Addr{netip.MustParseAddr("192.0.2.7")}
	for _, tt := range []struct {
		listen, dial string
		refused      bool
	}{
		{"127.0.0.1:9000", "127.0.0.1:9000", true},
		{"127.0.0.1:9000", "127.0.0.9:9000", true},
		{"127.0.0.1:9000", "[::1]:9000", true},
		{"127.0.0.1:9000", "0.0.0.0:9000", true},
		{"127.0.0.1:9000", "192.0.2.7:9000", true},
		{"127.0.0.1:9000", "127.0.0.1:9001", false},
		{"127.0.0.1:9000", "198.51.100.1:9000", false},
		{"0.0.0.0:9000", "192.0.2.7:9000", true},
		{"[::]:9000", "[::ffff:192.0.2.7]:9000", true},
		{"198.51.100.1:9000", "198.51.100.1:9000", true},
		{"198.51.100.1:9000", "198.51.100.2:9000", false},
	} {
		done := RefuseListener(netip.MustParseAddrPort(tt.listen))
		d := netip.MustParseAddrPort(tt.dial)
		_, refused := checkOwnListener(d.Addr(), int(d.Port()), host)
		done()
		if refused != tt.refused {
			t.Errorf("listening on %s, %s refused: %v, want %v", tt.listen, tt.dial, refused, tt.refused)
		}
		if _, after := checkOwnListener(d.Addr(), int(d.Port()), host); after {
			t.Errorf("listening on %s, %s still refused once given back", tt.listen, tt.dial)
		}
	}
}
