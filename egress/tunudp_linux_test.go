//go:build linux

package egress

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// TestTUNUDPPastTheBound: refused UDP is reported once per destination
// for the first maxUDPReported of them, and the datagrams to later ones
// are counted into summary events (one a second at most, one as the
// stack stops) naming the last; before, they went unrecorded, in the
// report and the audit stream alike (found by a tester). The control:
// each of the first destinations has its own event.
func TestTUNUDPPastTheBound(t *testing.T) {
	rules, err := ParseRules([]string{"allowed.test"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dns := netip.MustParseAddr("198.18.0.2")
	cfg := TUNConfig{MTU: 1500, DNS: dns, Names: netip.MustParsePrefix("198.19.0.0/16")}
	dev, peer := tunPair(t)
	t.Cleanup(func() { unix.Close(peer) })
	var mu sync.Mutex
	var events []Event
	p := &Proxy{Rules: rules, Audit: func(e Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}}
	served := make(chan struct{})
	go func() { p.ServeTUN(os.NewFile(uintptr(dev), "tun"), cfg); close(served) }()
	udpTo := func(a netip.Addr) []byte {
		pkt := dnsQuery(t, a, "x.")
		header.UDP(pkt[header.IPv4MinimumSize:]).SetDestinationPort(4444)
		return pkt
	}
	const extra = 45
	for i := 0; i < maxUDPReported+extra-1; i++ {
		unix.Write(peer, udpTo(netip.AddrFrom4([4]byte{8, 9, byte(i >> 8), byte(i)})))
	}
	unix.Write(peer, udpTo(netip.MustParseAddr("8.8.8.8")))
	// Every datagram handled: the stack answers a DNS query after them.
	tv := unix.NsecToTimeval(int64(2 * time.Second))
	unix.SetsockoptTimeval(peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	unix.Write(peer, dnsQuery(t, dns, "allowed.test."))
	buf := make([]byte, 2048)
	if _, err := readPeer(peer, buf); err != nil {
		t.Fatalf("the DNS query after the datagrams: %v", err)
	}
	p.Close()
	<-served
	mu.Lock()
	defer mu.Unlock()
	one, summed, last := 0, 0, false
	for _, e := range events {
		if e.Proto != ProtoUDP {
			continue
		}
		if e.Host != "" {
			one++
			continue
		}
		var n int
		if _, err := fmt.Sscan(e.Reason, &n); err != nil {
			t.Errorf("summary %q: %v", e.Reason, err)
		}
		summed += n
		last = last || strings.Contains(e.Reason, "the last to 8.8.8.8:4444")
	}
	if one != maxUDPReported || summed != extra || !last {
		t.Errorf("%d events of their own (want %d), %d datagrams in summaries (want %d), the last named %v", one, maxUDPReported, summed, extra, last)
	}
}
