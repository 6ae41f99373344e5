package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// fakeConn is an in-memory connection: reads come from a fixed input, then
// EOF; writes are counted and dropped. Deadlines are ignored (nothing
// blocks).
type fakeConn struct {
	mu      sync.Mutex
	in      *bytes.Reader
	written int
	closed  bool
}

func (c *fakeConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	return c.in.Read(b)
}

func (c *fakeConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	c.written += len(b)
	return len(b), nil
}

func (c *fakeConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func (c *fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }

const fakeResponse = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// FuzzProxyRequest feeds arbitrary bytes to one proxy connection (HTTP or
// SOCKS5, by the first byte, and whatever follows a CONNECT: ClientHello
// parsing included). Destinations are fakes in memory. The proxy must
// never panic (a recovered panic shows as an "internal error" event), and
// every event must be well-formed.
func FuzzProxyRequest(f *testing.F) {
	for _, s := range []string{
		"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"GET http://allowed.test/a HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET http://allowed.test/b HTTP/1.1\r\n\r\n",
		"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"GET http://2130706433/ HTTP/1.1\r\n\r\n",
		"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00",
		"CONNECT 10.1.2.3:22 HTTP/1.1\r\n\r\nSSH-2.0-x\r\n",
		"\x05\x01\x00\x05\x01\x00\x03\x0callowed.test\x01\xbb",
		"\x05\x01\x00\x05\x01\x00\x01\x0a\x01\x02\x03\x00\x50",
		"\x05\x01\x00\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x7f\x00\x00\x01\x00\x50",
		"\x05\x01\x00\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00",
	} {
		f.Add([]byte(s))
	}
	rules, err := ParseRules([]string{"allowed.test", "*.example.com"}, []string{"bad.example.com"}, []string{"10.1.0.0/16"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var events []Event
		p := &Proxy{
			Rules: rules,
			Resolver: func(context.Context, string) ([]netip.Addr, error) {
				return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
			},
			Dial: func(context.Context, netip.AddrPort) (net.Conn, error) {
				return &fakeConn{in: bytes.NewReader([]byte(fakeResponse))}, nil
			},
			Audit: func(e Event) { events = append(events, e) },
		}
		p.init()
		p.sem <- struct{}{}
		p.serveConn(&fakeConn{in: bytes.NewReader(in)})
		for _, e := range events {
			if e.Rule == "internal error" {
				t.Fatalf("panic while serving %q: %s", in, e.Reason)
			}
			switch e.Decision {
			case DecisionAllow:
				if e.Addr == "" || e.Rule == "" {
					t.Fatalf("allowed without an address or rule: %+v", e)
				}
			case DecisionDeny, DecisionError:
				if e.Reason == "" {
					t.Fatalf("refusal without a reason: %+v", e)
				}
			default:
				t.Fatalf("decision %q: %+v", e.Decision, e)
			}
			if _, err := json.Marshal(e); err != nil {
				t.Fatal(err)
			}
		}
		if len(p.conns) != 0 {
			t.Fatalf("%d connections left open", len(p.conns))
		}
	})
}

// FuzzClientHello checks the ClientHello reader on arbitrary bytes: it
// must not panic, must return exactly the bytes it consumed, and must stay
// within its bound; and bytes it passes on unchecked as another
// protocol's must be bytes in which crypto/tls's server finds no
// ClientHello (what it skips before one included).
func FuzzClientHello(f *testing.F) {
	f.Add(captureClientHello(f, "allowed.test"))
	f.Add(captureClientHello(f, ""))
	f.Add([]byte("\x16\x03\x01\x00\x01\x01\x16\x03\x01\x00\x03\x00\x00\x00"))
	f.Add(append([]byte("\x15\x03\x01\x00\x02\x01\x70"), captureClientHello(f, "other.test")...))
	f.Add(append([]byte("\x14\x03\x01\x00\x00"), captureClientHello(f, "other.test")...))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		raw, h, err := readClientHello(r)
		if consumed := len(in) - r.Len(); consumed != len(raw) || !bytes.Equal(raw, in[:consumed]) {
			t.Fatalf("returned %d bytes, consumed %d", len(raw), consumed)
		}
		if len(raw) > maxHelloBytes+5 {
			t.Fatalf("read %d bytes", len(raw))
		}
		if err == nil && h.hasSNI && !validSNI(h.sni) {
			t.Fatalf("invalid SNI %q accepted", h.sni)
		}
		if !h.isTLS {
			c := &helloConn{}
			c.r.Reset(in)
			if err := tls.Server(c, helloConfig).Handshake(); errors.Is(err, errHelloParsed) {
				t.Fatalf("passed on as not TLS, but crypto/tls reads a ClientHello for %q", c.sni)
			}
		}
	})
}

// captureClientHello returns the first flight of a crypto/tls client.
func captureClientHello(tb testing.TB, serverName string) []byte {
	tb.Helper()
	cl, srv := net.Pipe()
	go func() {
		tc := tlsClient(cl, serverName)
		tc.Handshake()
		cl.Close()
	}()
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	raw, h, err := readClientHello(srv)
	srv.Close()
	if err != nil || h.sni != serverName {
		tb.Fatalf("reading a crypto/tls ClientHello for %q: %q %v", serverName, h.sni, err)
	}
	return raw
}
