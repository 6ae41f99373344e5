package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"syscall"
	"time"
)

// SOCKS5 (RFC 1928), the subset moat serves, hand-written because it is a
// few fixed-size fields and the standard library has no server for it:
//
//	client                               proxy
//	05 NMETHODS METHODS...          ->
//	                                <-   05 00          (no authentication)
//	05 CMD 00 ATYP ADDR PORT        ->                  (CMD 01 CONNECT only)
//	                                <-   05 REP 00 01 0.0.0.0 0
//	... bytes both ways ...
//
// ATYP 01 is IPv4, 03 a name (one length byte), 04 IPv6. A destination
// the rules refuse gets REP 02 ("connection not allowed by ruleset");
// BIND and UDP ASSOCIATE get 07 ("command not supported").
const (
	socksVersion            = 0x05
	socksNoAuth             = 0x00
	socksNoAcceptableMethod = 0xff
	socksCmdConnect         = 0x01
	socksAtypIPv4           = 0x01
	socksAtypDomain         = 0x03
	socksAtypIPv6           = 0x04

	socksSucceeded         = 0x00
	socksGeneralFailure    = 0x01
	socksNotAllowed        = 0x02
	socksHostUnreachable   = 0x04
	socksConnectionRefused = 0x05
	socksCmdNotSupported   = 0x07
	socksAtypNotSupported  = 0x08
)

func (cc *clientConn) serveSOCKS() {
	ev := &Event{Time: cc.start, Proto: ProtoSOCKS5}
	defer cc.finish(ev)
	fail := func(reason string, err error) {
		ev.Decision, ev.Rule = DecisionError, "bad request"
		if isTimeout(err) {
			ev.Rule = "header timeout"
		}
		ev.Reason = reason
		if err != nil {
			ev.Reason += ": " + err.Error()
		}
	}

	var hdr [2]byte
	if _, err := io.ReadFull(cc.br, hdr[:]); err != nil {
		fail("incomplete SOCKS5 greeting", err)
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(cc.br, methods); err != nil {
		fail("incomplete SOCKS5 greeting", err)
		return
	}
	if !containsByte(methods, socksNoAuth) {
		cc.c.Write([]byte{socksVersion, socksNoAcceptableMethod})
		fail("the client offered no method moat's SOCKS5 proxy supports (it needs no authentication)", nil)
		return
	}
	if _, err := cc.c.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		fail("write", err)
		return
	}

	var req [4]byte
	if _, err := io.ReadFull(cc.br, req[:]); err != nil {
		fail("incomplete SOCKS5 request", err)
		return
	}
	if req[0] != socksVersion {
		fail(fmt.Sprintf("SOCKS5 request with version %d", req[0]), nil)
		return
	}
	var d Dest
	switch req[3] {
	case socksAtypIPv4, socksAtypIPv6:
		b := make([]byte, 4)
		if req[3] == socksAtypIPv6 {
			b = make([]byte, 16)
		}
		if _, err := io.ReadFull(cc.br, b); err != nil {
			fail("incomplete SOCKS5 request", err)
			return
		}
		d.IP, _ = netip.AddrFromSlice(b)
		d.Host = d.IP.String()
	case socksAtypDomain:
		n, err := cc.br.ReadByte()
		b := make([]byte, n)
		if err == nil {
			_, err = io.ReadFull(cc.br, b)
		}
		if err != nil {
			fail("incomplete SOCKS5 request", err)
			return
		}
		d.Host = string(b)
	default:
		cc.socksReply(socksAtypNotSupported)
		fail(fmt.Sprintf("SOCKS5 address type %d is not supported", req[3]), nil)
		return
	}
	var port [2]byte
	if _, err := io.ReadFull(cc.br, port[:]); err != nil {
		fail("incomplete SOCKS5 request", err)
		return
	}
	d.Port = int(port[0])<<8 | int(port[1])
	ev.Host, ev.Port = d.Host, d.Port

	if req[1] != socksCmdConnect {
		ev.Decision, ev.Rule = DecisionDeny, "socks5 command"
		ev.Reason = fmt.Sprintf("SOCKS5 command %d is refused: moat's proxy supports CONNECT only (no BIND, no UDP ASSOCIATE: UDP does not leave the sandbox)", req[1])
		cc.tell(ev)
		cc.socksReply(socksCmdNotSupported)
		return
	}

	t, v := cc.p.decide(d, ev)
	if !v.Allow || !cc.p.check(Query{Host: ev.Host, Port: d.Port}, ev) {
		ev.Decision = DecisionDeny
		cc.tell(ev)
		cc.socksReply(socksNotAllowed)
		return
	}
	up, addr, err := cc.p.connect(context.Background(), t)
	if err != nil {
		var refused *errRefused
		switch {
		case errors.As(err, &refused):
			ev.Decision, ev.Rule, ev.Reason = DecisionDeny, refused.v.Rule, refused.v.Reason
			cc.tell(ev)
			cc.socksReply(socksNotAllowed)
		case errors.Is(err, syscall.ECONNREFUSED):
			ev.Decision, ev.Reason = DecisionError, err.Error()
			cc.tell(ev)
			cc.socksReply(socksConnectionRefused)
		default:
			ev.Decision, ev.Reason = DecisionError, err.Error()
			cc.tell(ev)
			cc.socksReply(socksHostUnreachable)
		}
		return
	}
	ev.Decision, ev.Addr = DecisionAllow, addr.String()
	if err := cc.socksReply(socksSucceeded); err != nil {
		up.Close()
		ev.Decision, ev.Reason = DecisionError, "write reply: "+err.Error()
		return
	}
	cc.tunnel(up, t, ev)
}

// socksReply sends a reply with an all-zero bound address: the client has
// no use for the host's address, and should not learn it.
func (cc *clientConn) socksReply(rep byte) error {
	cc.c.SetWriteDeadline(time.Now().Add(cc.p.headerTimeout()))
	defer cc.c.SetWriteDeadline(time.Time{})
	_, err := cc.c.Write([]byte{socksVersion, rep, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}
