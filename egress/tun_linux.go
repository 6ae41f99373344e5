//go:build linux

package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/moatbox/moat/internal/pollwait"
)

// TUNBuiltIn says this moat serves TUN devices: on Linux it does.
const TUNBuiltIn = true

// maxUDPReported bounds the UDP destinations the TUN front end reports
// refused one by one: the first ones of a run. Datagrams to later ones
// are counted, and reported together, one event a second at most and
// one more as the stack stops (udpSummary).
const maxUDPReported = 256

// tunTCPBuffer bounds the send and receive buffers of each TCP
// connection of a TUN device's stack (see start).
const tunTCPBuffer = 256 << 10

// tunStack is one TUN device served by a netstack.
type tunStack struct {
	p   *Proxy
	cfg TUNConfig
	s   *stack.Stack
	f   *os.File

	mu     sync.Mutex
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
	next   netip.Addr
	udpRef map[string]bool // UDP destinations already reported refused
	// udpMore counts the datagrams refused to destinations past
	// maxUDPReported since udpAt, the last of them to udpLast.
	udpMore int
	udpAt   time.Time
	udpLast string
	// dnsDone is closed when serveDNS has returned (made with the
	// stack): its last event is emitted before teardown returns.
	dnsDone chan struct{}
	done    chan struct{}
	closed  bool
	// dev is the device's duplicate serve reads, in the runtime's
	// poller; link and out are the stack's link to it, made with the
	// stack.
	dev      *os.File
	link     *channel.Endpoint
	out      *tunWriter
	stopping atomic.Bool // serve is to return
}

// ServeTUN serves the packets of a TUN device (IFF_TUN, no packet
// information; with virtio-net headers if c.VnetHdr) with gVisor's
// userspace TCP/IP stack: TCP connections go
// through the same decisions as the proxy's tunnels (Rules.Decide, Check,
// then CheckAddr on every address the name resolves to, a TLS ClientHello
// checked against the name, HTTPSOnly, and Secrets), DNS queries to c.DNS are
// answered from the rules, and everything else is dropped. It takes f
// and closes it when it returns: after Close or once the device is gone
// (ErrClosed), or when the device cannot be served.
func (p *Proxy) ServeTUN(f *os.File, c TUNConfig) error {
	p.init()
	if p.Rules == nil {
		f.Close()
		return errors.New("egress: Proxy.Rules is nil")
	}
	if !c.DNS.Is4() || !c.Names.Addr().Is4() || c.MTU < 576 {
		f.Close()
		return fmt.Errorf("egress: TUN configuration %+v needs IPv4 addresses and an MTU of at least 576", c)
	}
	ts := &tunStack{p: p, cfg: c, f: f, byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{},
		next: c.Names.Masked().Addr().Next(), udpRef: map[string]bool{}, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ts.teardown()
		return ErrClosed
	}
	if p.tuns == nil {
		p.tuns = map[stopper]struct{}{}
	}
	p.tuns[ts] = struct{}{}
	p.mu.Unlock()
	err := ts.serve()
	ts.teardown()
	if err != nil {
		return fmt.Errorf("egress: TUN device: %w", err)
	}
	return ErrClosed
}

// serve reads the device's packets and hands each to the stack on this
// goroutine, until ts is stopped (nil) or the device fails. It waits in
// the runtime's poller, on a non-blocking duplicate of the device's fd:
// no thread is held while nothing comes, as a session spends most of its
// life. The stack is made at the first IPv4 packet: an allow-mode run
// whose commands use only the proxy spends nothing on it. Other packets
// are dropped, before and after: the kernel's own IPv6 packets (router
// solicitations, multicast reports), which it sends out of the device
// about a second after it is up, and IPv4 packets of any protocol but TCP
// and UDP (ICMP, IGMP).
//
// Packets go to the stack on the goroutine that read them, and out to
// the device on the goroutine that sent them (tunWriter): the fd-based
// link endpoint of gVisor hands each packet read to another goroutine,
// one more wake-up in every connection's round trips.
func (ts *tunStack) serve() error {
	rc, err := ts.f.SyscallConn()
	if err != nil {
		return err
	}
	var w *os.File
	err = errors.New("no fd")
	rc.Control(func(fd uintptr) { w, err = pollwait.Dup(int(fd), "tun") })
	if err != nil {
		return fmt.Errorf("the runtime's poller cannot wait on it: %w", err)
	}
	ts.mu.Lock()
	if ts.closed {
		ts.mu.Unlock()
		w.Close()
		return nil
	}
	ts.dev = w
	ts.mu.Unlock()
	if rc, err = w.SyscallConn(); err != nil {
		return err
	}
	var buf []byte // made once something is there, then kept
	hdr := 0       // the virtio-net header's length, when there is one
	if ts.cfg.VnetHdr {
		hdr = virtioNetHdrLen
	}
	var failed error
	err = rc.Read(func(fd uintptr) bool {
		for !ts.stopping.Load() {
			if buf == nil {
				if revents, err := pollwait.Now(fd); err != nil || revents == 0 {
					return err != nil
				}
				buf = make([]byte, hdr+ts.cfg.MTU)
			}
			n, err := unix.Read(int(fd), buf)
			switch {
			case err == unix.EINTR:
			case err == unix.EAGAIN:
				return false
			case err == unix.EBADFD || err == nil && n == 0:
				return true // the device is gone, with the sandbox's network namespace
			case err != nil:
				failed = fmt.Errorf("read: %w", err)
				return true
			case n <= hdr || buf[hdr]>>4 != 4:
			case n < hdr+header.IPv4MinimumSize || tcpip.TransportProtocolNumber(buf[hdr+9]) != header.TCPProtocolNumber &&
				tcpip.TransportProtocolNumber(buf[hdr+9]) != header.UDPProtocolNumber:
				// Only TCP and UDP reach the stack: it would answer an
				// ICMP echo request to the resolver's address itself.
			case hdr > 0 && buf[1] != unix.VIRTIO_NET_HDR_GSO_NONE:
				// Never sent: the device offloads no segmentation.
			default:
				if ts.link == nil {
					if failed = ts.start(int(fd)); failed != nil {
						return true
					}
				}
				pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(buf[hdr:n])})
				ts.link.InjectInbound(ipv4.ProtocolNumber, pkt)
				pkt.DecRef()
			}
		}
		return true
	})
	if ts.stopping.Load() {
		return nil
	}
	if failed != nil {
		return failed
	}
	return err
}

// start makes the stack, whose link writes to fd.
func (ts *tunStack) start(fd int) error {
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	// A connection's buffers are moat's memory, outside the sandbox's
	// limits: with netstack's defaults (a 1 MiB send buffer, growing to
	// 4 MiB) a command that opened connections and never read them held
	// about 1.5 MiB of moat's memory each, 400 MB at the connection limit
	// (found by a tester). A quarter MiB covers the device's
	// bandwidth-delay product many times over: it is a local link.
	for _, opt := range []tcpip.SettableTransportProtocolOption{
		&tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: 64 << 10, Max: tunTCPBuffer},
		&tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: 64 << 10, Max: tunTCPBuffer},
	} {
		if e := s.SetTransportProtocolOption(tcp.ProtocolNumber, opt); e != nil {
			s.Close()
			return fmt.Errorf("TCP buffer sizes: %s", e)
		}
	}
	ts.mu.Lock()
	if ts.closed {
		ts.mu.Unlock()
		s.Close()
		return ErrClosed
	}
	ts.s = s // teardown closes it from now on
	ts.mu.Unlock()
	// The queue holds what is sent until tunWriter takes it, at once.
	ts.link = channel.New(256, uint32(ts.cfg.MTU), "")
	if ts.cfg.VnetHdr {
		ts.link.LinkEPCapabilities = stack.CapabilityTXChecksumOffload | stack.CapabilityRXChecksumOffload
	}
	ts.out = &tunWriter{link: ts.link, fd: fd, vnet: ts.cfg.VnetHdr}
	ts.link.AddNotify(ts.out)
	const nic = 1
	if e := ts.s.CreateNIC(nic, ts.link); e != nil {
		return errors.New(e.String())
	}
	// Every destination is the stack's to answer (promiscuous), and it
	// answers as that destination (spoofing).
	if e := ts.s.SetPromiscuousMode(nic, true); e != nil {
		return errors.New(e.String())
	}
	if e := ts.s.SetSpoofing(nic, true); e != nil {
		return errors.New(e.String())
	}
	ts.s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: nic}})
	// One socket answers every DNS query, whatever its source port: no
	// state per query, so a program that looks up many names is served
	// as well as one that looks up a few.
	dns := tcpip.AddrFrom4(ts.cfg.DNS.As4())
	if e := ts.s.AddProtocolAddress(nic, tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: dns.WithPrefix()}, stack.AddressProperties{}); e != nil {
		return errors.New(e.String())
	}
	// The socket is made here rather than by gonet.DialUDP for its
	// endpoint's counters: a query that finds the socket's buffer full
	// is dropped by the stack before moat reads it, and the resolver's
	// events count those with the ones moat drops itself.
	var wq waiter.Queue
	ep, e := ts.s.NewEndpoint(udp.ProtocolNumber, ipv4.ProtocolNumber, &wq)
	if e != nil {
		return fmt.Errorf("DNS socket: %s", e)
	}
	if e := ep.Bind(tcpip.FullAddress{NIC: nic, Addr: dns, Port: 53}); e != nil {
		ep.Close()
		return fmt.Errorf("DNS socket: bind: %s", e)
	}
	var full func() uint64
	if st, ok := ep.Stats().(*tcpip.TransportEndpointStats); ok {
		full = st.ReceiveErrors.ReceiveBufferOverflow.Value
	}
	ts.dnsDone = make(chan struct{})
	go ts.serveDNS(gonet.NewUDPConn(&wq, ep), full)
	fwd := tcp.NewForwarder(ts.s, 0, 256, ts.handleTCP)
	ts.s.SetTransportProtocolHandler(tcp.ProtocolNumber, fwd.HandlePacket)
	ts.s.SetTransportProtocolHandler(udp.ProtocolNumber, udp.NewForwarder(ts.s, ts.handleUDP).HandlePacket)
	return nil
}

// tunWriter writes the packets the stack sends to the device, on the
// goroutine that sent them (channel.Notification), one at a time so that
// a connection's segments leave in the order they were sent.
type tunWriter struct {
	link   *channel.Endpoint
	vnet   bool // each packet goes with a virtio-net header
	mu     sync.Mutex
	fd     int
	closed bool // the fd is closed: packets are dropped
	hdr    [virtioNetHdrLen]byte
	iov    [][]byte
}

func (w *tunWriter) WriteNotify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for pkt := w.link.Read(); pkt != nil; pkt = w.link.Read() {
		if !w.closed {
			w.iov = w.iov[:0]
			if w.vnet {
				w.iov = append(w.iov, vnetHdr(pkt, &w.hdr))
			}
			w.iov = append(w.iov, pkt.AsSlices()...)
			// A TUN device takes each write whole, or drops it as a
			// full link would.
			for {
				if _, err := unix.Writev(w.fd, w.iov); err != unix.EINTR {
					break
				}
			}
			clear(w.iov)
		}
		pkt.DecRef()
	}
}

// virtioNetHdrLen is the length of a struct virtio_net_hdr, the header
// of a device's packets with IFF_VNET_HDR (and no TUNSETVNETHDRSZ).
const virtioNetHdrLen = 10

// vnetHdr fills h, the virtio-net header of pkt, which the stack sends
// with its TCP checksum left to the device (TUNConfig.VnetHdr): the
// checksum field gets the pseudo-header's sum and the header marks the
// rest to be summed from the TCP header on (VIRTIO_NET_HDR_F_NEEDS_CSUM),
// which the kernel records as a partial checksum (CHECKSUM_PARTIAL): a
// socket it is delivered to takes it as checked, and a path that needs
// the sum (forwarding) completes it. Other packets need nothing: the
// stack sums ICMP whatever the device, and UDP over IPv4 may go without
// (a zero checksum). The header is in the byte order of the host's CPU
// (a legacy virtio-net header, as TUN devices have by default).
func vnetHdr(pkt *stack.PacketBuffer, h *[virtioNetHdrLen]byte) []byte {
	*h = [virtioNetHdrLen]byte{}
	ip := header.IPv4(pkt.NetworkHeader().Slice())
	t := header.TCP(pkt.TransportHeader().Slice())
	if pkt.TransportProtocolNumber != header.TCPProtocolNumber || len(ip) < header.IPv4MinimumSize || len(t) < header.TCPMinimumSize {
		return h[:]
	}
	t.SetChecksum(header.PseudoHeaderChecksum(header.TCPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), ip.PayloadLength()))
	h[0] = unix.VIRTIO_NET_HDR_F_NEEDS_CSUM
	h[1] = unix.VIRTIO_NET_HDR_GSO_NONE
	binary.NativeEndian.PutUint16(h[2:], uint16(len(ip)+len(t))) // hdr_len
	binary.NativeEndian.PutUint16(h[6:], uint16(len(ip)))        // csum_start
	binary.NativeEndian.PutUint16(h[8:], header.TCPChecksumOffset)
	return h[:]
}

func (w *tunWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// stop ends serve and waits for the stack's goroutines to end and the
// device to be closed.
func (ts *tunStack) stop() {
	ts.mu.Lock()
	if !ts.closed {
		ts.closed = true
		ts.stopping.Store(true)
		if ts.dev != nil {
			ts.dev.SetReadDeadline(time.Unix(1, 0)) // wakes serve
		}
	}
	ts.mu.Unlock()
	<-ts.done
}

// teardown, once serve has returned, ends the stack's goroutines, then
// closes the device.
func (ts *tunStack) teardown() {
	ts.mu.Lock()
	ts.closed = true
	ts.stopping.Store(true)
	s := ts.s
	ts.mu.Unlock()
	if s != nil {
		s.Close()
		s.Wait()
	}
	if ts.dnsDone != nil {
		<-ts.dnsDone
	}
	ts.mu.Lock()
	summary := ts.udpSummaryLocked()
	ts.mu.Unlock()
	if summary != nil {
		ts.p.emit(*summary)
	}
	if ts.out != nil {
		ts.out.close()
	}
	if ts.dev != nil {
		ts.dev.Close()
	}
	ts.f.Close()
	close(ts.done)
}

// recover turns a panic on one of the stack's goroutines into an error
// event, as the proxy does for a connection: one flow ends, not moat. It
// must be deferred directly.
func (ts *tunStack) recover(proto string) {
	if r := recover(); r != nil {
		ts.p.emit(Event{Time: time.Now(), Proto: proto, Decision: DecisionError, Rule: "internal error", Reason: panicReason(r)})
	}
}

// addrOf gives name its address in Names, the same one for the whole run.
func (ts *tunStack) addrOf(name string) (netip.Addr, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if a, ok := ts.byName[name]; ok {
		return a, true
	}
	a := ts.next
	if !ts.cfg.Names.Contains(a) || a == ts.cfg.DNS || !ts.cfg.Names.Contains(a.Next()) {
		return netip.Addr{}, false // exhausted (the broadcast address is never handed out)
	}
	ts.next = a.Next()
	ts.byName[name], ts.byAddr[a] = a, name
	return a, true
}

func (ts *tunStack) nameOf(a netip.Addr) (string, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n, ok := ts.byAddr[a]
	return n, ok
}

func fromTCPIP(a tcpip.Address) netip.Addr {
	ip, _ := netip.AddrFromSlice(a.AsSlice())
	return ip.Unmap()
}

// handleTCP decides a connection the sandbox opens (the forwarder runs it
// on a goroutine of its own, before the handshake completes): a refused
// destination gets a reset, an allowed one a connection relayed as the
// proxy relays a tunnel.
func (ts *tunStack) handleTCP(r *tcp.ForwarderRequest) {
	p := ts.p
	if !p.enter() {
		r.Complete(true)
		return
	}
	defer p.served.Done()
	defer ts.recover(ProtoTCP)
	id := r.ID()
	dst, port := fromTCPIP(id.LocalAddress), int(id.LocalPort)
	ev := &Event{Time: time.Now(), Proto: ProtoTCP, Host: dst.String(), Port: port}
	select {
	case p.sem <- struct{}{}:
		defer func() { <-p.sem }()
	default:
		ev.Decision, ev.Rule = DecisionError, "max connections"
		ev.Reason = fmt.Sprintf("more than %d connections at once; this one was refused", p.maxConns())
		p.emit(*ev) // before the client learns (see clientConn.tell)
		r.Complete(true)
		return
	}
	if dst == ts.cfg.DNS {
		// moat's own resolver, which is no host anywhere: allow_cidrs
		// naming it would send the connection to whatever answers that
		// address on the host's network.
		ev.Decision, ev.Rule = DecisionDeny, "moat's resolver"
		ev.Reason = fmt.Sprintf("%s is moat's resolver in the sandbox, which answers DNS over UDP only: DNS over TCP (dig +tcp, options use-vc) is not served", dst)
		p.emit(*ev)
		r.Complete(true)
		return
	}
	d := Dest{IP: dst, Port: port}
	if ts.cfg.Names.Contains(dst) {
		name, ok := ts.nameOf(dst)
		if !ok {
			ev.Decision, ev.Rule = DecisionDeny, "unknown address"
			ev.Reason = fmt.Sprintf("no name was resolved to %s inside the sandbox", dst)
			p.emit(*ev)
			r.Complete(true)
			return
		}
		d = Dest{Host: name, Port: port}
	}
	t, v := p.decide(d, ev)
	if !v.Allow || !p.check(Query{Host: ev.Host, Port: port}, ev) {
		ev.Decision = DecisionDeny
		p.emit(*ev)
		r.Complete(true)
		return
	}
	up, addr, err := p.connect(context.Background(), t)
	if err != nil {
		var refused *errRefused
		if errors.As(err, &refused) {
			ev.Decision, ev.Rule, ev.Reason = DecisionDeny, refused.v.Rule, refused.v.Reason
		} else {
			ev.Decision, ev.Reason = DecisionError, err.Error()
		}
		p.emit(*ev)
		r.Complete(true)
		return
	}
	var wq waiter.Queue
	ep, e := r.CreateEndpoint(&wq)
	if e != nil {
		r.Complete(true)
		p.untrack(up)
		ev.Decision, ev.Reason = DecisionError, "accept from the sandbox: "+e.String()
		p.emit(*ev)
		return
	}
	r.Complete(false)
	ev.Decision, ev.Addr = DecisionAllow, addr.String()
	c := gonet.NewTCPConn(&wq, ep)
	if !p.track(c) {
		p.untrack(up)
		return
	}
	defer p.untrack(c)
	cc := p.newClientConn(c)
	defer cc.release()
	defer cc.finish(ev)
	cc.tunnel(up, t, ev)
}

// handleUDP drops every datagram that is not DNS to cfg.DNS (the
// resolver's socket receives those), reporting each refused destination
// once.
func (ts *tunStack) handleUDP(r *udp.ForwarderRequest) bool {
	if !ts.p.enter() {
		return true
	}
	defer ts.p.served.Done()
	defer ts.recover(ProtoUDP)
	id := r.ID()
	dst, port := fromTCPIP(id.LocalAddress), int(id.LocalPort)
	host := dst.String()
	if name, ok := ts.nameOf(dst); ok {
		host = name
	}
	key := fmt.Sprintf("%s:%d", host, port)
	now := time.Now()
	ts.mu.Lock()
	known := ts.udpRef[key]
	over := !known && len(ts.udpRef) >= maxUDPReported
	if !known && !over {
		ts.udpRef[key] = true
	}
	var summary *Event
	if over {
		if ts.udpMore == 0 {
			ts.udpAt = now
		}
		ts.udpMore++
		ts.udpLast = key
		if now.Sub(ts.udpAt) >= time.Second {
			summary = ts.udpSummaryLocked()
		}
	}
	ts.mu.Unlock()
	switch {
	case summary != nil:
		ts.p.emit(*summary)
	case !known && !over:
		ts.p.emit(Event{Time: now, Proto: ProtoUDP, Host: host, Port: port, Decision: DecisionDeny,
			Rule: "udp", Reason: fmt.Sprintf("UDP to %s is refused: only DNS (to moat's resolver) leaves the sandbox over UDP", key)})
	}
	return true
}

// udpSummaryLocked is the event for the datagrams counted in udpMore,
// and resets the count; nil when there are none. ts.mu is held.
func (ts *tunStack) udpSummaryLocked() *Event {
	if ts.udpMore == 0 {
		return nil
	}
	ev := &Event{Time: ts.udpAt, Proto: ProtoUDP, Decision: DecisionDeny, Rule: "udp",
		Reason: fmt.Sprintf("%d UDP datagrams refused to destinations past the first %d (the last to %s): only DNS (to moat's resolver) leaves the sandbox over UDP", ts.udpMore, maxUDPReported, ts.udpLast)}
	ts.udpMore = 0
	return ev
}

// The resolver answers at most dnsRate queries a second, dnsBurst at
// once. Each answer is an event (an audit record, a line of the report)
// and work in moat's process, which the sandbox's CPU limit does not
// cover, and a sandbox sends queries as fast as its CPU lets it. Queries
// beyond are dropped unanswered (the sandbox's resolver asks again), and
// each second of drops is one event. A program resolves a name with one
// or two queries, so the rate is far above what lookups need.
const (
	dnsRate  = 2000
	dnsBurst = 4000
)

// serveDNS answers the queries to the resolver's socket until the stack
// closes it. full, when not nil, counts the queries the stack dropped
// because the socket's buffer was full (moat did not read fast enough).
func (ts *tunStack) serveDNS(c *gonet.UDPConn, full func() uint64) {
	defer close(ts.dnsDone)
	defer c.Close()
	lim := rate.NewLimiter(dnsRate, dnsBurst)
	// Queries dropped since: those over the rate, and those the socket
	// had no room for (fullSeen is the count already reported).
	limited, overflowed, since := 0, 0, time.Time{}
	var fullSeen uint64
	count := func() {
		if full == nil {
			return
		}
		if n := full(); n > fullSeen {
			if limited+overflowed == 0 {
				since = time.Now()
			}
			overflowed += int(n - fullSeen)
			fullSeen = n
		}
	}
	report := func() {
		count()
		if limited+overflowed == 0 {
			return
		}
		reason := fmt.Sprintf("%d queries were dropped unanswered: moat's resolver answers at most %d a second", limited+overflowed, dnsRate)
		switch {
		case overflowed > 0 && limited > 0:
			reason = fmt.Sprintf("%d queries were dropped unanswered: %d over moat's resolver's rate (at most %d a second), %d that arrived faster than moat read them", limited+overflowed, limited, dnsRate, overflowed)
		case overflowed > 0:
			reason = fmt.Sprintf("%d queries were dropped unanswered: they arrived faster than moat's resolver read them", overflowed)
		}
		ts.p.emit(Event{Time: since, Proto: ProtoDNS, Decision: DecisionError, Rule: "dns rate", Reason: reason})
		limited, overflowed = 0, 0
	}
	defer report()
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		if !lim.Allow() {
			count()
			if limited+overflowed == 0 {
				since = time.Now()
			}
			limited++
			if time.Since(since) >= time.Second {
				report()
			}
			continue
		}
		report()
		if out := ts.safeAnswer(buf[:n]); out != nil {
			c.WriteTo(out, from)
		}
	}
}

// safeAnswer is answer, with a panic made an error event (and no answer).
func (ts *tunStack) safeAnswer(q []byte) []byte {
	defer ts.recover(ProtoDNS)
	return ts.answer(q)
}

// answer is the reply to one DNS query: an allowed name's address (A),
// no records of other types, NXDOMAIN for a refused name; nil for what is
// not a query. Every query is an Event.
func (ts *tunStack) answer(q []byte) []byte {
	var pr dnsmessage.Parser
	h, err := pr.Start(q)
	if err != nil || h.Response {
		return nil
	}
	resp := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	question, err := pr.Question()
	if err == nil {
		// One question a query (RFC 9619): a second one would be neither
		// answered nor recorded.
		if _, err2 := pr.Question(); err2 != dnsmessage.ErrSectionDone {
			err = errors.New("more than one question")
		}
	}
	if err != nil || h.OpCode != 0 {
		resp.RCode = dnsmessage.RCodeFormatError
		if h.OpCode != 0 {
			resp.RCode = dnsmessage.RCodeNotImplemented
		}
		b := dnsmessage.NewBuilder(nil, resp)
		out, _ := b.Finish()
		return out
	}
	name := strings.TrimSuffix(strings.ToLower(question.Name.String()), ".")
	v := ts.p.Rules.DecideName(name)
	if rv, bad := ts.p.Secrets.refuseName(name); bad && v.Allow {
		v = rv
	}
	// The event and the name's address go by the name as the proxy's
	// events name it (normalised); a name that is none is only bytes the
	// sandbox chose, recorded quoted.
	if n, err := normalizeHost(name); err == nil {
		name = n
	} else {
		name = printableHost(name)
	}
	ev := Event{Time: time.Now(), Proto: ProtoDNS, Host: name, Reason: question.Type.String()}
	ev.Rule = v.Rule
	var a netip.Addr
	switch {
	case !v.Allow:
		ev.Decision, ev.Reason = DecisionDeny, v.Reason
		resp.RCode = dnsmessage.RCodeNameError
	case question.Type == dnsmessage.TypeA:
		var ok bool
		if a, ok = ts.addrOf(name); !ok {
			ev.Decision, ev.Reason = DecisionError, "no address left to give a name"
			resp.RCode = dnsmessage.RCodeServerFailure
		} else {
			ev.Decision, ev.Addr = DecisionAllow, a.String()
		}
	default:
		ev.Decision = DecisionAllow // the name exists; it has no records of this type
	}
	ts.p.emit(ev)
	b := dnsmessage.NewBuilder(nil, resp)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(question) != nil {
		return nil
	}
	if a.IsValid() {
		b.StartAnswers()
		b.AResource(dnsmessage.ResourceHeader{Name: question.Name, Class: dnsmessage.ClassINET, TTL: 60},
			dnsmessage.AResource{A: a.As4()})
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
