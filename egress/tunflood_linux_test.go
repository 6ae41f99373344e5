//go:build linux

package egress

import (
	"context"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// TestTUNSynFlood: SYNs from many ports to an allowed destination whose
// connection never completes hold at most MaxConns connections (and
// their goroutines) in moat's process; the rest are refused at once. The
// control: the SYNs did reach the proxy's dialer.
func TestTUNSynFlood(t *testing.T) {
	rules, err := ParseRules([]string{"allowed.test"}, nil, []string{"203.0.113.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	var dials, refusedBusy atomic.Int32
	release := make(chan struct{})
	p := &Proxy{Rules: rules, MaxConns: 64, DialTimeout: 20 * time.Second,
		Dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			dials.Add(1)
			select {
			case <-ctx.Done():
			case <-release:
			}
			return nil, context.DeadlineExceeded
		},
		Audit: func(e Event) {
			if e.Rule == "max connections" {
				refusedBusy.Add(1)
			}
		}}
	t.Cleanup(func() { p.Close() })
	defer close(release)
	dev, peer := tunPair(t)
	t.Cleanup(func() { unix.Close(peer) })
	base := runtime.NumGoroutine()
	go p.ServeTUN(os.NewFile(uintptr(dev), "tun"), TUNConfig{MTU: 1500, DNS: netip.MustParseAddr("198.18.0.2"), Names: netip.MustParsePrefix("198.19.0.0/16")})
	syn := synTo(netip.MustParseAddr("203.0.113.5"), true)
	for i := range 2000 {
		tcp := header.TCP(syn[header.IPv4MinimumSize:])
		tcp.SetSourcePort(uint16(10000 + i))
		tcp.SetChecksum(0)
		ip := header.IPv4(syn)
		xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), header.TCPMinimumSize)
		tcp.SetChecksum(^tcp.CalculateChecksum(xsum))
		unix.Write(peer, syn)
	}
	deadline := time.Now().Add(5 * time.Second)
	for dials.Load() < 64 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := dials.Load(); n != 64 {
		t.Errorf("%d dials, want 64 (MaxConns)", n)
	}
	if refusedBusy.Load() == 0 {
		t.Error("no connection was refused as one too many")
	}
	if g := runtime.NumGoroutine() - base; g > 64+32 {
		t.Errorf("%d more goroutines with 64 connections held", g)
	}
}
