package main

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

// serve -addr takes one IPv4 address: the transparent path's server listens
// on the host's own address, and must never listen on all of them.
func TestServeAddrRefused(t *testing.T) {
	for _, a := range []string{"0.0.0.0", "::1", "::", "localhost", ""} {
		err := serve([]string{"-addr", a})
		if err == nil || !strings.Contains(err.Error(), "-addr") {
			t.Errorf("serve -addr %q: %v, want an -addr error", a, err)
		}
	}
}

// The control: listenOn listens on the address it is given.
func TestListenOn(t *testing.T) {
	want := netip.MustParseAddr("127.0.0.1")
	l, err := listenOn(want)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := l.Addr().(*net.TCPAddr).AddrPort()
	if got.Addr().Unmap() != want || got.Port() == 0 {
		t.Fatalf("listening on %v, want %v and a port", got, want)
	}
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
