//go:build linux

package egress

import (
	"encoding/binary"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// synTo is a TCP SYN from 198.18.0.1:40000 to dst:80 whose checksum is
// the pseudo-header's sum alone, as a kernel leaves it for a device that
// offloads checksums (partial), or the whole sum (full).
func synTo(dst netip.Addr, full bool) []byte {
	pkt := make([]byte, header.IPv4MinimumSize+header.TCPMinimumSize)
	ip := header.IPv4(pkt)
	src, d := tcpip.AddrFrom4([4]byte{198, 18, 0, 1}), tcpip.AddrFrom4(dst.As4())
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(pkt)), TTL: 64, Protocol: uint8(header.TCPProtocolNumber), SrcAddr: src, DstAddr: d})
	ip.SetChecksum(^ip.CalculateChecksum())
	tcp := header.TCP(pkt[header.IPv4MinimumSize:])
	tcp.Encode(&header.TCPFields{SrcPort: 40000, DstPort: 80, SeqNum: 1, DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagSyn, WindowSize: 65535})
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, src, d, header.TCPMinimumSize)
	if full {
		tcp.SetChecksum(^tcp.CalculateChecksum(xsum))
	} else {
		tcp.SetChecksum(xsum)
	}
	return pkt
}

// vnetPartial is the virtio-net header a kernel puts before a TCP packet
// with a partial checksum.
func vnetPartial() []byte {
	h := make([]byte, virtioNetHdrLen)
	h[0] = unix.VIRTIO_NET_HDR_F_NEEDS_CSUM
	binary.NativeEndian.PutUint16(h[6:], header.IPv4MinimumSize)
	binary.NativeEndian.PutUint16(h[8:], header.TCPChecksumOffset)
	return h
}

// TestTUNChecksumOffload: with TUNConfig.VnetHdr, the stack takes a
// packet whose TCP checksum the kernel left partial, and sends its own TCP
// segments partial too, with the header that tells the kernel how to
// complete them, which gives a valid checksum. The control: without it, the
// same partial packet is dropped unanswered (the stack checks the sum),
// and the same packet with its full sum is answered with a full sum. The
// answer is a reset: the destination is an address of Names no name was
// given.
func TestTUNChecksumOffload(t *testing.T) {
	rules, err := ParseRules([]string{"allowed.test"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := netip.MustParseAddr("198.19.0.99")
	serve := func(vnet bool) int {
		t.Helper()
		cfg := TUNConfig{MTU: 1500, DNS: netip.MustParseAddr("198.18.0.2"), Names: netip.MustParsePrefix("198.19.0.0/16"), VnetHdr: vnet}
		dev, peer := tunPair(t)
		t.Cleanup(func() { unix.Close(peer) })
		p := &Proxy{Rules: rules}
		t.Cleanup(func() { p.Close() })
		go p.ServeTUN(os.NewFile(uintptr(dev), "tun"), cfg)
		tv := unix.NsecToTimeval(int64(time.Second))
		unix.SetsockoptTimeval(peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		return peer
	}
	// answer is the reset peer reads, its virtio-net header cut off
	// (hdr), with its TCP checksum checked.
	answer := func(peer, hdr int) (pkt, h []byte) {
		t.Helper()
		buf := make([]byte, 2048)
		n, err := readPeer(peer, buf)
		if err != nil {
			return nil, nil
		}
		h, pkt = buf[:hdr], buf[hdr:n]
		ip := header.IPv4(pkt)
		if !ip.IsValid(len(pkt)) || ip.TransportProtocol() != header.TCPProtocolNumber {
			t.Fatalf("not an IPv4 TCP packet: %x", buf[:n])
		}
		tcp := header.TCP(ip.Payload())
		if tcp.Flags()&header.TCPFlagRst == 0 || tcp.DestinationPort() != 40000 {
			t.Fatalf("not the reset: flags %v, port %d", tcp.Flags(), tcp.DestinationPort())
		}
		return pkt, h
	}
	valid := func(pkt []byte) bool {
		ip := header.IPv4(pkt)
		tcp := header.TCP(ip.Payload())
		return tcp.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(tcp.Payload(), 0), uint16(len(tcp.Payload())))
	}

	// With the header: the partial SYN is answered, and the answer is
	// partial, completed as the kernel does.
	peer := serve(true)
	unix.Write(peer, append(vnetPartial(), synTo(dst, false)...))
	pkt, h := answer(peer, virtioNetHdrLen)
	if pkt == nil {
		t.Fatal("with VnetHdr: a SYN with a partial checksum went unanswered")
	}
	start, off := binary.NativeEndian.Uint16(h[6:]), binary.NativeEndian.Uint16(h[8:])
	if h[0] != unix.VIRTIO_NET_HDR_F_NEEDS_CSUM || h[1] != unix.VIRTIO_NET_HDR_GSO_NONE || start != header.IPv4MinimumSize || off != header.TCPChecksumOffset {
		t.Fatalf("virtio-net header %x", h)
	}
	if valid(pkt) {
		t.Error("the reset's checksum is already whole: nothing was offloaded")
	}
	seg := pkt[start:]
	binary.BigEndian.PutUint16(seg[off:], ^checksum.Checksum(seg, 0))
	if !valid(pkt) {
		t.Error("the reset's checksum, completed from its header, is not valid")
	}

	// Without: the partial SYN is dropped, the full one answered in full.
	peer = serve(false)
	unix.Write(peer, synTo(dst, false))
	if pkt, _ := answer(peer, 0); pkt != nil {
		t.Fatal("without VnetHdr: a SYN with a partial checksum was answered")
	}
	unix.Write(peer, synTo(dst, true))
	pkt, _ = answer(peer, 0)
	if pkt == nil {
		t.Fatal("without VnetHdr: a SYN with its full checksum went unanswered")
	}
	if !valid(pkt) {
		t.Error("without VnetHdr: the reset's checksum is not valid")
	}
}
