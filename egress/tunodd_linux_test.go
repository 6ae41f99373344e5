//go:build linux

package egress

import (
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// icmpEcho is an IPv4 ICMP echo request from 198.18.0.1 to dst.
func icmpEcho(dst netip.Addr) []byte {
	pkt := make([]byte, header.IPv4MinimumSize+header.ICMPv4MinimumSize+8)
	ip := header.IPv4(pkt)
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(pkt)), TTL: 64, Protocol: uint8(header.ICMPv4ProtocolNumber),
		SrcAddr: tcpip.AddrFrom4([4]byte{198, 18, 0, 1}), DstAddr: tcpip.AddrFrom4(dst.As4())})
	ip.SetChecksum(^ip.CalculateChecksum())
	icmp := header.ICMPv4(pkt[header.IPv4MinimumSize:])
	icmp.SetType(header.ICMPv4Echo)
	icmp.SetIdent(7)
	icmp.SetSequence(1)
	copy(icmp.Payload(), "moatping")
	icmp.SetChecksum(0)
	icmp.SetChecksum(^checksumOf(icmp))
	return pkt
}

func checksumOf(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// TestTUNOddPackets: what the device's stack is given that is neither a
// DNS query to its resolver nor TCP gets no answer (ICMP echo requests to
// any address, IPv6, IP fragments that never complete, truncated and
// malformed IPv4 headers, UDP to other ports), and the stack goes on
// serving: the control is a DNS query after each, which is answered.
func TestTUNOddPackets(t *testing.T) {
	rules, err := ParseRules([]string{"allowed.test"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dns := netip.MustParseAddr("198.18.0.2")
	cfg := TUNConfig{MTU: 1500, DNS: dns, Names: netip.MustParsePrefix("198.19.0.0/16")}
	dev, peer := tunPair(t)
	t.Cleanup(func() { unix.Close(peer) })
	p := &Proxy{Rules: rules}
	t.Cleanup(func() { p.Close() })
	go p.ServeTUN(os.NewFile(uintptr(dev), "tun"), cfg)
	tv := unix.NsecToTimeval(int64(300 * time.Millisecond))
	unix.SetsockoptTimeval(peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	read := func() []byte {
		buf := make([]byte, 2048)
		n, err := readPeer(peer, buf)
		if err != nil {
			return nil
		}
		return buf[:n]
	}
	// answered waits for the resolver's answer, longer than read's
	// silence: under CI's load it came after 300 ms.
	answered := func() bool {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			if read() != nil {
				return true
			}
		}
		return false
	}
	// The control: the resolver answers.
	unix.Write(peer, dnsQuery(t, dns, "allowed.test."))
	if !answered() {
		t.Fatal("the control DNS query went unanswered")
	}

	// The first fragment of a query, whose rest never comes.
	frag := dnsQuery(t, dns, "allowed.test.")
	header.IPv4(frag).SetFlagsFragmentOffset(header.IPv4FlagMoreFragments, 0)
	header.IPv4(frag).SetChecksum(0)
	header.IPv4(frag).SetChecksum(^header.IPv4(frag).CalculateChecksum())
	otherPort := dnsQuery(t, dns, "allowed.test.")
	header.UDP(otherPort[header.IPv4MinimumSize:]).SetDestinationPort(5353)
	v6 := make([]byte, 48)
	v6[0] = 0x60
	for _, c := range []struct {
		name string
		pkt  []byte
	}{
		{"ICMP echo to 8.8.8.8", icmpEcho(netip.MustParseAddr("8.8.8.8"))},
		{"ICMP echo to the resolver", icmpEcho(dns)},
		{"ICMP echo to a name's address", icmpEcho(netip.MustParseAddr("198.19.0.1"))},
		{"IPv6", v6},
		{"the first fragment of a DNS query", frag},
		{"UDP to the resolver's address, another port", otherPort},
		{"a truncated IPv4 header", icmpEcho(dns)[:12]},
		{"an IPv4 header longer than the packet", func() []byte { b := icmpEcho(dns); b[0] = 0x4f; return b }()},
	} {
		unix.Write(peer, c.pkt)
		if b := read(); b != nil {
			t.Errorf("%s: answered with %x", c.name, b)
		}
		unix.Write(peer, dnsQuery(t, dns, "allowed.test."))
		if !answered() {
			t.Fatalf("after %s, a DNS query went unanswered", c.name)
		}
	}
}
