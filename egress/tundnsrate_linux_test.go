//go:build linux

package egress

import (
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// TestTUNDNSRate: a flood of queries gets at most dnsBurst answers at
// once, the rest are dropped and reported as events that count them,
// and the resolver answers again a second later (the control: queries at
// a lookup's pace are all answered, before and after).
func TestTUNDNSRate(t *testing.T) {
	rules, err := ParseRules([]string{"allowed.test"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var answered, dropped int
	p := &Proxy{Rules: rules, Audit: func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Proto == ProtoDNS && e.Rule == "dns rate":
			var n int
			for _, c := range e.Reason {
				if c < '0' || c > '9' {
					break
				}
				n = n*10 + int(c-'0')
			}
			dropped += n
		case e.Proto == ProtoDNS:
			answered++
		}
	}}
	dns := netip.MustParseAddr("198.18.0.2")
	dev, peer := tunPair(t)
	t.Cleanup(func() { unix.Close(peer) })
	served := make(chan error, 1)
	go func() {
		served <- p.ServeTUN(os.NewFile(uintptr(dev), "tun"), TUNConfig{MTU: 1500, DNS: dns, Names: netip.MustParsePrefix("198.19.0.0/16")})
	}()
	var replies atomic.Int32
	// The reader ends when the device's end closes (end of file), and
	// the test waits for it: one left reading this fd number would read
	// the next test's socket, once the number is reused, and take its
	// packets.
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		buf := make([]byte, 2048)
		for {
			n, err := unix.Read(peer, buf)
			if err != nil || n == 0 {
				return
			}
			if n > header.IPv4MinimumSize && header.IPv4(buf[:n]).TransportProtocol() == header.UDPProtocolNumber {
				replies.Add(1)
			}
		}
	}()
	waitReplies := func(want int32) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); replies.Load() < want && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		if got := replies.Load(); got != want {
			t.Fatalf("%d answers, want %d", got, want)
		}
	}
	q := dnsQuery(t, dns, "allowed.test.")
	for range 10 {
		unix.Write(peer, q)
		time.Sleep(time.Millisecond)
	}
	waitReplies(10)

	const flood = 3 * dnsBurst
	start := time.Now()
	for i := range flood {
		udp := header.UDP(q[header.IPv4MinimumSize:])
		udp.SetSourcePort(uint16(2000 + i%50000))
		unix.Write(peer, q)
	}
	elapsed := time.Since(start)
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	got := answered - 10
	mu.Unlock()
	if max := int(dnsBurst + dnsRate*elapsed.Seconds() + 50); got > max || got < dnsBurst/2 {
		t.Errorf("%d of %d queries answered in %v, want at most %d", got, flood, elapsed, max)
	}

	time.Sleep(time.Second)
	before := replies.Load()
	for range 10 {
		unix.Write(peer, q)
		time.Sleep(time.Millisecond)
	}
	waitReplies(before + 10)
	// Queries the stack's socket had no room for never reached moat:
	// the stack counts them, under load (a CI run lost 7% so).
	var lost int
	p.mu.Lock()
	for st := range p.tuns {
		if ts, ok := st.(*tunStack); ok && ts.s != nil {
			st := ts.s.Stats()
			lost += int(st.UDP.ReceiveBufferErrors.Value() + st.DroppedPackets.Value())
		}
	}
	p.mu.Unlock()
	p.Close()
	<-served
	select {
	case <-readerDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the device's end was not closed when ServeTUN ended")
	}
	mu.Lock()
	defer mu.Unlock()
	// Every query is an event, or counted in one; the device's peer may
	// miss answers (its socket's buffer is full), and the stack's socket
	// might miss queries, but not many.
	if total := 10 + flood + 10; dropped == 0 || answered+dropped > total || answered+dropped+lost < total*95/100 {
		t.Errorf("events: %d answered, %d dropped, of %d queries (%d the stack had no room for)", answered, dropped, total, lost)
	}
	t.Logf("flood of %d in %v: %d answered, %d dropped and reported, %d the stack had no room for", flood, elapsed, got, dropped, lost)
}
