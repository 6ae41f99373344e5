//go:build linux

package egress

import (
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/moatbox/moat/internal/proctest"
)

// tunOf returns the tunStack p serves, once ServeTUN has registered it.
func tunOf(t *testing.T, p *Proxy) *tunStack {
	t.Helper()
	for range 500 {
		p.mu.Lock()
		for s := range p.tuns {
			p.mu.Unlock()
			return s.(*tunStack)
		}
		p.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("ServeTUN registered no device")
	return nil
}

func (ts *tunStack) started() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.s != nil
}

// dnsQuery is an IPv4 UDP packet from 198.18.0.1:5353 asking dns for the
// A record of name.
func dnsQuery(t *testing.T, dns netip.Addr, name string) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 9, RecursionDesired: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	pkt := make([]byte, header.IPv4MinimumSize+header.UDPMinimumSize+len(q))
	ip := header.IPv4(pkt)
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(pkt)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4([4]byte{198, 18, 0, 1}), DstAddr: tcpip.AddrFrom4(dns.As4())})
	ip.SetChecksum(^ip.CalculateChecksum())
	udp := header.UDP(pkt[header.IPv4MinimumSize:])
	udp.Encode(&header.UDPFields{SrcPort: 5353, DstPort: 53, Length: uint16(header.UDPMinimumSize + len(q))})
	copy(pkt[header.IPv4MinimumSize+header.UDPMinimumSize:], q)
	return pkt
}

// TestTUNStartsOnFirstPacket: the stack serving a device is made only when
// the first IPv4 packet comes (a socket pair stands in for the device):
// not while none has come, not for an IPv6 packet (the kernel's own, which
// are dropped), and that first packet is served (the control: a DNS query
// gets its answer). A proxy closed before any packet ends ServeTUN.
func TestTUNStartsOnFirstPacket(t *testing.T) {
	rules, err := ParseRules([]string{"allowed.test"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := TUNConfig{MTU: 1500, DNS: netip.MustParseAddr("198.18.0.2"), Names: netip.MustParsePrefix("198.19.0.0/16")}
	pair := func() (*os.File, int) {
		dev, peer := tunPair(t)
		t.Cleanup(func() { unix.Close(peer) })
		return os.NewFile(uintptr(dev), "tun"), peer
	}

	p := &Proxy{Rules: rules}
	dev, peer := pair()
	done := make(chan error, 1)
	go func() { done <- p.ServeTUN(dev, cfg) }()
	ts := tunOf(t, p)
	time.Sleep(100 * time.Millisecond)
	if ts.started() {
		t.Fatal("the stack was made before any packet")
	}
	v6 := make([]byte, header.IPv6MinimumSize)
	v6[0] = 0x60
	unix.Write(peer, v6)
	time.Sleep(100 * time.Millisecond)
	if ts.started() {
		t.Fatal("the stack was made for an IPv6 packet")
	}
	unix.Write(peer, dnsQuery(t, cfg.DNS, "allowed.test."))
	unix.SetNonblock(peer, false)
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	unix.SetsockoptTimeval(peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 2048)
	n, err := readPeer(peer, buf)
	if err != nil {
		t.Fatalf("no answer to the first packet: %v", err)
	}
	ip := header.IPv4(buf[:n])
	udp := header.UDP(ip.Payload())
	var m dnsmessage.Message
	if err := m.Unpack(udp.Payload()); err != nil || m.ID != 9 || len(m.Answers) != 1 {
		t.Fatalf("answer: %v %+v", err, m)
	}
	if !ts.started() {
		t.Error("answered, but no stack is recorded")
	}
	p.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("ServeTUN after Close: %v", err)
	}

	idle := &Proxy{Rules: rules}
	dev2, _ := pair()
	done2 := make(chan error, 1)
	go func() { done2 <- idle.ServeTUN(dev2, cfg) }()
	tunOf(t, idle)
	idle.Close()
	select {
	case err := <-done2:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("ServeTUN closed before any packet: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeTUN did not end when its proxy was closed before any packet")
	}
}

// TestTUNHoldsNoThread: devices whose stacks are up and serving, but idle,
// hold no thread each: the reader waits in the runtime's poller. The
// control: as many goroutines blocked in read(2) on the same kind of
// descriptor hold a thread each, as this count sees.
func TestTUNHoldsNoThread(t *testing.T) {
	rules, err := ParseRules([]string{"allowed.test"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := TUNConfig{MTU: 1500, DNS: netip.MustParseAddr("198.18.0.2"), Names: netip.MustParsePrefix("198.19.0.0/16")}
	const n = 24
	settle := func() { time.Sleep(300 * time.Millisecond) }
	settle()
	base := proctest.Threads(t)
	p := &Proxy{Rules: rules}
	defer p.Close()
	for range n {
		dev, peer := tunPair(t)
		defer unix.Close(peer)
		go p.ServeTUN(os.NewFile(uintptr(dev), "tun"), cfg)
		// The first packet makes the stack; its answer shows it serves.
		unix.Write(peer, dnsQuery(t, cfg.DNS, "allowed.test."))
		tv := unix.NsecToTimeval(int64(5 * time.Second))
		unix.SetsockoptTimeval(peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		if _, err := readPeer(peer, make([]byte, 2048)); err != nil {
			t.Fatalf("no answer: %v", err)
		}
	}
	settle()
	if grew := proctest.Threads(t) - base; grew >= n/2 {
		t.Errorf("%d idle devices: %d more threads", n, grew)
	}

	base = proctest.Threads(t)
	var blocked []int
	for range n {
		a, b := tunPair(t)
		blocked = append(blocked, b)
		defer unix.Close(a)
		go unix.Read(a, make([]byte, 1))
	}
	settle()
	if grew := proctest.Threads(t) - base; grew < n/2 {
		t.Errorf("control: %d goroutines in read(2): only %d more threads", n, grew)
	}
	for _, b := range blocked {
		unix.Write(b, []byte{1})
		unix.Close(b)
	}
}

// tunPair is a socket pair that stands in for a TUN device: a packet per
// message.
func tunPair(t *testing.T) (dev, peer int) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fds[0], fds[1]
}

// readPeer reads one packet from a stand-in device's peer, again when a
// signal interrupted the wait: a socket with a receive timeout is not
// restarted after the runtime's preemption signal.
func readPeer(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Read(fd, buf)
		if err != unix.EINTR {
			return n, err
		}
	}
}
