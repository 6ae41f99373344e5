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

// resolverTest is moat's resolver served on a device of the test's
// (TUNConfig's DNS address), and a reader of its answers.
type resolverTest struct {
	p          *Proxy
	peer       int
	dns        netip.Addr
	served     chan error
	readerDone chan struct{}
	replies    atomic.Int32 // UDP datagrams the device sent back
}

// startResolver serves the resolver allowing allowed.test, with the
// proxy's events going to audit.
func startResolver(t *testing.T, audit func(Event)) *resolverTest {
	t.Helper()
	rules, err := ParseRules([]string{"allowed.test"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &resolverTest{p: &Proxy{Rules: rules, Audit: audit}, dns: netip.MustParseAddr("198.18.0.2"),
		served: make(chan error, 1), readerDone: make(chan struct{})}
	dev, peer := tunPair(t)
	r.peer = peer
	t.Cleanup(func() { unix.Close(peer) })
	go func() {
		r.served <- r.p.ServeTUN(os.NewFile(uintptr(dev), "tun"), TUNConfig{MTU: 1500, DNS: r.dns, Names: netip.MustParsePrefix("198.19.0.0/16")})
	}()
	// The reader ends when the device's end closes (end of file), and
	// the test waits for it: one left reading this fd number would read
	// the next test's socket, once the number is reused, and take its
	// packets.
	go func() {
		defer close(r.readerDone)
		buf := make([]byte, 2048)
		for {
			n, err := readPeer(peer, buf)
			if err != nil || n == 0 {
				return
			}
			if n > header.IPv4MinimumSize && header.IPv4(buf[:n]).TransportProtocol() == header.UDPProtocolNumber {
				r.replies.Add(1)
			}
		}
	}()
	return r
}

// query sends q n times at a lookup's pace and waits for their answers.
func (r *resolverTest) query(t *testing.T, q []byte, n int32) {
	t.Helper()
	want := r.replies.Load() + n
	for range n {
		unix.Write(r.peer, q)
		time.Sleep(time.Millisecond)
	}
	for deadline := time.Now().Add(5 * time.Second); r.replies.Load() < want && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := r.replies.Load(); got != want {
		t.Fatalf("%d answers, want %d", got, want)
	}
}

// flood sends n copies of q from as many source ports, at once.
func (r *resolverTest) flood(q []byte, n int) {
	for i := range n {
		udp := header.UDP(q[header.IPv4MinimumSize:])
		udp.SetSourcePort(uint16(2000 + i%50000))
		unix.Write(r.peer, q)
	}
}

// stop ends the resolver and waits for its device's end to close.
func (r *resolverTest) stop(t *testing.T) {
	t.Helper()
	r.p.Close()
	<-r.served
	select {
	case <-r.readerDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the device's end was not closed when ServeTUN ended")
	}
}

// droppedIn is the count of queries a "dns rate" event's reason begins
// with.
func droppedIn(reason string) int {
	n, _, _ := strings.Cut(reason, " ")
	d, _ := strconv.Atoi(n)
	return d
}

// TestTUNDNSRate: a flood of queries gets at most dnsBurst answers at
// once, the rest are dropped and reported as events that count them,
// and the resolver answers again a second later (the control: queries at
// a lookup's pace are all answered, before and after).
func TestTUNDNSRate(t *testing.T) {
	var mu sync.Mutex
	var answered, dropped int
	r := startResolver(t, func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Proto == ProtoDNS && e.Rule == "dns rate":
			dropped += droppedIn(e.Reason)
		case e.Proto == ProtoDNS:
			answered++
		}
	})
	q := dnsQuery(t, r.dns, "allowed.test.")
	r.query(t, q, 10)

	const flood = 3 * dnsBurst
	start := time.Now()
	r.flood(q, flood)
	elapsed := time.Since(start)
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	got := answered - 10
	mu.Unlock()
	if max := int(dnsBurst + dnsRate*elapsed.Seconds() + 50); got > max || got < dnsBurst/2 {
		t.Errorf("%d of %d queries answered in %v, want at most %d", got, flood, elapsed, max)
	}

	time.Sleep(time.Second)
	r.query(t, q, 10)
	// Queries the stack dropped before any socket (none expected) are in
	// no event; those the resolver's socket had no room for are counted
	// in its "dns rate" events (a CI run lost 7% of the flood there).
	var lost int
	r.p.mu.Lock()
	for st := range r.p.tuns {
		if ts, ok := st.(*tunStack); ok && ts.s != nil {
			lost += int(ts.s.Stats().DroppedPackets.Value())
		}
	}
	r.p.mu.Unlock()
	r.stop(t)
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
	var mu sync.Mutex
	var answered, dropped int
	var reasons []string
	r := startResolver(t, func(e Event) {
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
		dropped += droppedIn(e.Reason)
	})
	q := dnsQuery(t, r.dns, "allowed.test.")
	r.query(t, q, 10)

	// More than the socket's buffer holds (some are over the rate too,
	// once the resolver reads again).
	const flood = 3 * dnsBurst
	mu.Lock()
	r.flood(q, flood)
	time.Sleep(100 * time.Millisecond)
	mu.Unlock()
	time.Sleep(300 * time.Millisecond)
	r.stop(t)
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
