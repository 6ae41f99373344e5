//go:build linux

package egress

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/link/nested"
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
// refused: the first ones of a run; later ones are dropped without an
// event.
const maxUDPReported = 256

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
	done   chan struct{}
	closed bool
	// waiting is the device's duplicate that awaitFirst waits on, in the
	// runtime's poller, until the first packet.
	waiting *os.File
}

// ServeTUN serves the packets of a TUN device (IFF_TUN, no packet
// information) with gVisor's userspace TCP/IP stack: TCP connections go
// through the same decisions as the proxy's tunnels (Rules.Decide, Check,
// then CheckAddr on every address the name resolves to, a TLS ClientHello
// checked against the name, HTTPSOnly, and Secrets), DNS queries to c.DNS are
// answered from the rules, and everything else is dropped. It takes f
// and closes it when it returns: after Close (ErrClosed) or when the
// stack cannot be set up.
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
		ts.stop()
		return ErrClosed
	}
	if p.tuns == nil {
		p.tuns = map[stopper]struct{}{}
	}
	p.tuns[ts] = struct{}{}
	p.mu.Unlock()
	// The stack starts with the first packet: its reader holds a thread
	// and a buffer of the MTU's size, which an allow-mode session whose
	// commands use only the proxy would hold for nothing, and making it
	// is CPU a run that does not use it need not spend.
	first, ok := ts.awaitFirst()
	if !ok {
		ts.stop()
		return ErrClosed
	}
	if err := ts.start(first); err != nil {
		ts.mu.Lock()
		closed := ts.closed // a stack closed while it was set up fails
		ts.mu.Unlock()
		ts.stop()
		if closed {
			return ErrClosed
		}
		return fmt.Errorf("egress: TUN device: %w", err)
	}
	<-ts.done
	return ErrClosed
}

// awaitFirst waits for the device's first IPv4 packet, holding no thread
// and no buffer: on a non-blocking duplicate of its fd in the runtime's
// poller. It reads and drops what comes before it: the kernel's own IPv6
// packets (router solicitations, multicast reports), which it sends out
// of the device about a second after it is up, and which the stack would
// drop too. It returns the packet, or false once ts is stopped; nil and
// true at once where the poller cannot take the device.
func (ts *tunStack) awaitFirst() ([]byte, bool) {
	rc, err := ts.f.SyscallConn()
	if err != nil {
		return nil, true
	}
	var w *os.File
	err = errors.New("no fd")
	rc.Control(func(fd uintptr) { w, err = pollwait.Dup(int(fd), "tun") })
	if err != nil {
		return nil, true // not in the poller
	}
	defer w.Close()
	if rc, err = w.SyscallConn(); err != nil {
		return nil, true
	}
	ts.mu.Lock()
	if ts.closed {
		ts.mu.Unlock()
		return nil, false
	}
	ts.waiting = w
	ts.mu.Unlock()
	var first []byte
	rc.Read(func(fd uintptr) bool {
		var buf []byte // made once something is there, for all that is
		for {
			if revents, err := pollwait.Now(fd); err != nil || revents == 0 {
				return err != nil
			}
			if buf == nil {
				buf = make([]byte, ts.cfg.MTU)
			}
			n, err := unix.Read(int(fd), buf)
			switch {
			case err == unix.EINTR:
			case err == unix.EAGAIN:
				return false
			case err != nil:
				return true // the stack's reader will see it too
			case n > 0 && buf[0]>>4 == 4:
				first = buf[:n]
				return true
			}
		}
	})
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.waiting = nil
	return first, !ts.closed
}

// start makes the stack and gives it first, the packet awaitFirst read
// (nil: none).
func (ts *tunStack) start(first []byte) error {
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	ts.mu.Lock()
	if ts.closed {
		ts.mu.Unlock()
		s.Close()
		return ErrClosed
	}
	ts.s = s // stop closes it from now on
	ts.mu.Unlock()
	ep, err := fdbased.New(&fdbased.Options{FDs: []int{int(ts.f.Fd())}, MTU: uint32(ts.cfg.MTU)})
	if err != nil {
		return err
	}
	// The device's endpoint, nested so that the first packet, read
	// before the endpoint's reader ran, can be handed to the stack.
	var link nested.Endpoint
	link.Init(ep, &link)
	const nic = 1
	if e := ts.s.CreateNIC(nic, &link); e != nil {
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
	conn, err := gonet.DialUDP(ts.s, &tcpip.FullAddress{NIC: nic, Addr: dns, Port: 53}, nil, ipv4.ProtocolNumber)
	if err != nil {
		return fmt.Errorf("DNS socket: %w", err)
	}
	go ts.serveDNS(conn)
	fwd := tcp.NewForwarder(ts.s, 0, 256, ts.handleTCP)
	ts.s.SetTransportProtocolHandler(tcp.ProtocolNumber, fwd.HandlePacket)
	ts.s.SetTransportProtocolHandler(udp.ProtocolNumber, udp.NewForwarder(ts.s, ts.handleUDP).HandlePacket)
	if first != nil {
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(first)})
		link.DeliverNetworkPacket(ipv4.ProtocolNumber, pkt)
		pkt.DecRef()
	}
	return nil
}

// stop ends the stack's goroutines, then closes the device.
func (ts *tunStack) stop() {
	ts.mu.Lock()
	if ts.closed {
		ts.mu.Unlock()
		return
	}
	ts.closed = true
	s := ts.s
	if ts.waiting != nil {
		ts.waiting.SetReadDeadline(time.Unix(1, 0)) // wakes awaitFirst
	}
	ts.mu.Unlock()
	if s != nil {
		s.Close()
		s.Wait()
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
	defer ts.recover(ProtoTCP)
	p := ts.p
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
	defer ts.recover(ProtoUDP)
	id := r.ID()
	dst, port := fromTCPIP(id.LocalAddress), int(id.LocalPort)
	host := dst.String()
	if name, ok := ts.nameOf(dst); ok {
		host = name
	}
	key := fmt.Sprintf("%s:%d", host, port)
	ts.mu.Lock()
	seen := ts.udpRef[key] || len(ts.udpRef) >= maxUDPReported
	if !seen {
		ts.udpRef[key] = true
	}
	ts.mu.Unlock()
	if !seen {
		ts.p.emit(Event{Time: time.Now(), Proto: ProtoUDP, Host: host, Port: port, Decision: DecisionDeny,
			Rule: "udp", Reason: fmt.Sprintf("UDP to %s is refused: only DNS (to moat's resolver) leaves the sandbox over UDP", key)})
	}
	return true
}

// serveDNS answers the queries to the resolver's socket until the stack
// closes it.
func (ts *tunStack) serveDNS(c *gonet.UDPConn) {
	defer c.Close()
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
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
	ev := Event{Time: time.Now(), Proto: ProtoDNS, Host: name, Reason: question.Type.String()}
	v := ts.p.Rules.DecideName(name)
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
