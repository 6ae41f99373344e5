//go:build linux

package egress

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
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
	// Queries the stack dropped before any socket (none expected) are in
	// no event; those the resolver's socket had no room for are counted
	// in its "dns rate" events (a CI run lost 7% of the flood there).
	var lost int
	p.mu.Lock()
	for st := range p.tuns {
		if ts, ok := st.(*tunStack); ok && ts.s != nil {
			lost += int(ts.s.Stats().DroppedPackets.Value())
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
	// Every query is an event, or counted in one (the device's peer may
	// miss answers: its socket's buffer is full).
	if total := 10 + flood + 10; dropped == 0 || answered+dropped > total || answered+dropped+lost < total {
		t.Errorf("events: %d answered, %d dropped, of %d queries (%d the stack dropped before the socket)", answered, dropped, total, lost)
	}
	t.Logf("flood of %d in %v: %d answered, %d dropped and reported, %d the stack dropped before the socket", flood, elapsed, got, dropped, lost)
}

// TestTUNDNSSocketFull: queries that arrive while the resolver is busy
// (here: held in its audit hook) and find its socket's buffer full are
// dropped by the stack before moat reads them; they are counted in a
// "dns rate" event that says so, and every query is in an event (the
// control: the same queries at a lookup's pace are all answered).
func TestTUNDNSSocketFull(t *testing.T) {
	rules, err := ParseRules([]string{"allowed.test"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var answered, dropped int
	var reasons []string
	p := &Proxy{Rules: rules, Audit: func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Proto != ProtoDNS {
			return
		}
		if e.Rule != "dns rate" {
			answered++
			return
		}
		reasons = append(reasons, e.Reason)
		n, _, _ := strings.Cut(e.Reason, " ")
		d, _ := strconv.Atoi(n)
		dropped += d
	}}
	dns := netip.MustParseAddr("198.18.0.2")
	dev, peer := tunPair(t)
	t.Cleanup(func() { unix.Close(peer) })
	served := make(chan error, 1)
	go func() {
		served <- p.ServeTUN(os.NewFile(uintptr(dev), "tun"), TUNConfig{MTU: 1500, DNS: dns, Names: netip.MustParsePrefix("198.19.0.0/16")})
	}()
	readerDone := make(chan struct{})
	var replies atomic.Int32
	go func() {
		defer close(readerDone)
		buf := make([]byte, 2048)
		for {
			n, err := unix.Read(peer, buf)
			if err != nil || n == 0 {
				return
			}
			replies.Add(1)
		}
	}()
	q := dnsQuery(t, dns, "allowed.test.")
	for range 10 {
		unix.Write(peer, q)
		time.Sleep(time.Millisecond)
	}
	for deadline := time.Now().Add(5 * time.Second); replies.Load() < 10 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := replies.Load(); got != 10 {
		t.Fatalf("%d answers to 10 queries at a lookup's pace", got)
	}

	// More than the socket's buffer holds (some are over the rate too,
	// once the resolver reads again).
	const flood = 3 * dnsBurst
	mu.Lock()
	for i := range flood {
		udp := header.UDP(q[header.IPv4MinimumSize:])
		udp.SetSourcePort(uint16(2000 + i%50000))
		unix.Write(peer, q)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Unlock()
	time.Sleep(300 * time.Millisecond)
	p.Close()
	<-served
	<-readerDone
	mu.Lock()
	defer mu.Unlock()
	if total := 10 + flood; dropped == 0 || answered+dropped != total {
		t.Fatalf("events: %d answered, %d dropped, of %d queries: %q", answered, dropped, total, reasons)
	}
	if !strings.Contains(strings.Join(reasons, "\n"), "faster than moat") {
		t.Errorf("the drops' event does not say the socket was full: %q", reasons)
	}
	t.Logf("%d answered, %d dropped: %q", answered, dropped, reasons)
}
