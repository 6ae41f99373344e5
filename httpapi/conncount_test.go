package httpapi

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestConnCountMakesRoom: past a caller's bound, or the bound of all, the
// oldest connection that showed no token is closed for the new one; one
// that showed a token is never closed, and with none to close the new one
// is refused. Loopback addresses are one caller.
func TestConnCountMakesRoom(t *testing.T) {
	cc := &connCount{by: map[string]int{}, conns: map[net.Conn]*counted{}, limit: 6}
	type conn struct {
		c, peer net.Conn
	}
	var all []conn
	dial := func() conn {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		all = append(all, conn{a, b})
		return conn{a, b}
	}
	isClosed := func(c conn) bool {
		c.peer.SetReadDeadline(pastDeadline)
		_, err := c.peer.Read(make([]byte, 1))
		return err != nil && !isTimeout(err)
	}
	lo := callerKey(netip.MustParseAddr("127.0.0.1"))
	if k := callerKey(netip.MustParseAddr("127.0.0.21")); k != lo {
		t.Errorf("127.0.0.21 is caller %q, 127.0.0.1 %q", k, lo)
	}
	if a, b := callerKey(netip.MustParseAddr("2001:db8::1")), callerKey(netip.MustParseAddr("2001:db8::2")); a != b {
		t.Errorf("one /64: %q and %q", a, b)
	}
	if a, b := callerKey(netip.MustParseAddr("192.0.2.1")), callerKey(netip.MustParseAddr("192.0.2.2")); a == b {
		t.Errorf("control: two IPv4 addresses are one caller %q", a)
	}
	// A tenant's connection, then three that show nothing: the bound of
	// 3 a caller closes the oldest of those for each new one.
	tenant := dial()
	if !cc.open(tenant.c, lo, 3, false) {
		t.Fatal("the first connection was refused")
	}
	cc.known(tenant.c)
	var strange []conn
	for range 4 {
		c := dial()
		if !cc.open(c.c, lo, 3, false) {
			t.Fatal("a connection was refused while there were older ones to close")
		}
		strange = append(strange, c)
	}
	if isClosed(tenant) {
		t.Error("the tenant's connection was closed to make room")
	}
	if !isClosed(strange[0]) || !isClosed(strange[1]) || isClosed(strange[2]) || isClosed(strange[3]) {
		t.Error("the oldest strange connections were not the ones closed")
	}
	// All three known: the next is refused.
	cc.known(strange[2].c)
	cc.known(strange[3].c)
	if cc.open(dial().c, lo, 3, false) {
		t.Error("a connection past the bound, with none to close, was served")
	}
	// The bound of all (6): other callers' strange connections make room
	// for a unix socket peer's.
	for i := range 3 {
		if !cc.open(dial().c, callerKey(netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)})), 3, false) {
			t.Fatal("another caller was refused")
		}
	}
	unix := dial()
	if !cc.open(unix.c, "uid:1000", 3, true) {
		t.Error("the unix socket's peer was refused past the bound of all")
	}
	if cc.total > cc.limit {
		t.Errorf("%d connections counted, bound %d", cc.total, cc.limit)
	}
}

var pastDeadline = time.Now().Add(-time.Second)

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
