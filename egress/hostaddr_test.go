package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"
)

// The proxy reads the host's addresses at the first connection, not when
// it starts, shares a reading between connections for hostAddrsMaxAge,
// reads again after that, and refuses a connection when it cannot read
// them. The addresses are stand-ins (Proxy.HostAddrs), the dials go to a
// loopback server: TestHostAddressOnInterface uses real interfaces.
func TestHostAddressRefused(t *testing.T) {
	s := startServers(t)
	var mu sync.Mutex
	reads := 0
	own := []netip.Addr{netip.MustParseAddr("93.184.216.34")}
	fakeHost := func(tp *testProxy) {
		names(map[string][]string{"own.test": {"93.184.216.34"}, "new.test": {"93.184.216.35"}})(tp)
		tp.HostAddrs = func() ([]netip.Addr, error) {
			mu.Lock()
			defer mu.Unlock()
			reads++
			return slices.Clone(own), nil
		}
		// The stand-in addresses lead to the loopback server.
		tp.Dial = func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
			tp.mu.Lock()
			tp.dialed = append(tp.dialed, ap)
			tp.mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, "tcp", s.http.Listener.Addr().String())
		}
	}
	readCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return reads
	}
	get := func(tp *testProxy, host string) (int, string) {
		resp, _ := tp.get(t, fmt.Sprintf("http://%s/", host), host)
		return resp.StatusCode, resp.Header.Get("X-Moat-Denied")
	}

	tp := newProxy(t, mustRules(t, []string{"own.test", "new.test"}, nil, nil), fakeHost)
	if n := readCount(); n != 0 {
		t.Errorf("the host's addresses were read %d times before any connection", n)
	}
	rule := "the host's own address 93.184.216.34"
	if status, denied := get(tp, "own.test"); status != 403 || denied != rule {
		t.Errorf("own.test: %d %q, want 403 %q", status, denied, rule)
	}
	wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, rule)
	if status, _ := get(tp, "new.test"); status != 200 {
		t.Errorf("new.test, not the host's: %d", status)
	}
	wantEvent(t, tp.event(t), ProtoHTTP, DecisionAllow, "new.test")
	if n := readCount(); n != 1 {
		t.Errorf("%d readings for two connections at once, want 1", n)
	}

	// The host gains an address: refused once the reading is renewed.
	mu.Lock()
	own = append(own, netip.MustParseAddr("93.184.216.35"))
	mu.Unlock()
	time.Sleep(hostAddrsMaxAge + 50*time.Millisecond)
	rule = "the host's own address 93.184.216.35"
	if status, denied := get(tp, "new.test"); status != 403 || denied != rule {
		t.Errorf("new.test once the host holds it: %d %q, want 403 %q", status, denied, rule)
	}
	wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, rule)
	if n := readCount(); n != 2 {
		t.Errorf("%d readings, want 2", n)
	}
	if d := tp.dials(); len(d) != 1 || d[0].Addr() != netip.MustParseAddr("93.184.216.35") {
		t.Errorf("dialed %v, want new.test's address once", d)
	}

	// allow_cidrs lets the host's own address through.
	open := newProxy(t, mustRules(t, []string{"own.test"}, nil, []string{"93.184.216.34/32"}), fakeHost)
	if status, _ := get(open, "own.test"); status != 200 {
		t.Errorf("own.test with allow_cidrs: %d", status)
	}
	wantEvent(t, open.event(t), ProtoHTTP, DecisionAllow, "own.test")

	// Addresses that cannot be read are not taken to be none.
	broken := newProxy(t, mustRules(t, []string{"new.test"}, nil, nil), fakeHost, func(tp *testProxy) {
		tp.HostAddrs = func() ([]netip.Addr, error) { return nil, errors.New("netlink: no") }
	})
	if status, _ := get(broken, "new.test"); status != 502 {
		t.Errorf("unreadable host addresses: %d, want 502", status)
	}
	if e := broken.event(t); e.Decision != DecisionError || e.Reason != "read the host's addresses: netlink: no" {
		t.Errorf("event %+v", e)
	}
	if d := broken.dials(); len(d) != 0 {
		t.Errorf("dialed %v", d)
	}
}
