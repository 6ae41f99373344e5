package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCert is a self-signed certificate for the test names, shared by the
// HTTPS test servers and trusted by the test clients.
var testCert = sync.OnceValue(func() tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "moat egress test"},
		DNSNames:              []string{"allowed.test", "other.test", "denied.test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
})

func testRoots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(testCert().Leaf)
	return p
}

// helloHandler answers with the Host header it saw and the request's
// method, so tests can check what reached the destination.
var helloHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Proxy-Authorization") != "" || r.Header.Get("Proxy-Connection") != "" {
		http.Error(w, "proxy headers leaked", 500)
		return
	}
	body, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "hello %s %s %s body=%s", r.Host, r.Method, r.URL.RequestURI(), body)
})

// servers are the loopback destinations of a test.
type servers struct {
	http, https *httptest.Server
	httpPort    int
	httpsPort   int
	conns       *connCounter
}

type connCounter struct {
	mu sync.Mutex
	n  int
}

func (c *connCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func startServers(t *testing.T) *servers {
	t.Helper()
	s := &servers{conns: &connCounter{}}
	s.http = httptest.NewUnstartedServer(helloHandler)
	s.http.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.mu.Lock()
			s.conns.n++
			s.conns.mu.Unlock()
		}
	}
	s.http.Start()
	t.Cleanup(s.http.Close)
	s.https = httptest.NewUnstartedServer(helloHandler)
	s.https.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	s.https.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	s.https.StartTLS()
	t.Cleanup(s.https.Close)
	s.httpPort = s.http.Listener.Addr().(*net.TCPAddr).Port
	s.httpsPort = s.https.Listener.Addr().(*net.TCPAddr).Port
	return s
}

// testProxy is a Proxy under test with what it reported.
type testProxy struct {
	*Proxy
	addr     string // host:port of its TCP listener
	events   chan Event
	mu       sync.Mutex
	dialed   []netip.AddrPort
	resolved []string
}

type proxyOpt func(*testProxy)

// names maps test names to addresses for the Resolver hook.
func names(m map[string][]string) proxyOpt {
	return func(tp *testProxy) {
		tp.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
			tp.mu.Lock()
			tp.resolved = append(tp.resolved, host)
			tp.mu.Unlock()
			addrs, ok := m[host]
			if !ok {
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}
			var out []netip.Addr
			for _, a := range addrs {
				out = append(out, netip.MustParseAddr(a))
			}
			return out, nil
		}
	}
}

// newProxy starts a proxy on 127.0.0.1 whose Dial hook only ever connects
// to loopback (so nothing a test does leaves the machine) and records what
// it was asked to dial; redirect maps other addresses to loopback ones.
func newProxy(t *testing.T, rules *Rules, opts ...proxyOpt) *testProxy {
	t.Helper()
	tp := &testProxy{Proxy: &Proxy{Rules: rules, RunID: "test-run"}, events: make(chan Event, 1000)}
	tp.Audit = func(e Event) { tp.events <- e }
	names(map[string][]string{
		"allowed.test":   {"127.0.0.1"},
		"other.test":     {"127.0.0.1"},
		"denied.test":    {"127.0.0.1"},
		"private.test":   {"10.0.0.1"},
		"metadata.test":  {"169.254.169.254"},
		"loopback6.test": {"::1"},
	})(tp)
	tp.Dial = func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		tp.mu.Lock()
		tp.dialed = append(tp.dialed, ap)
		tp.mu.Unlock()
		if !ap.Addr().IsLoopback() {
			return nil, fmt.Errorf("test dialer: %s is not loopback, not dialing", ap)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ap.String())
	}
	for _, o := range opts {
		o(tp)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.addr = l.Addr().String()
	done := make(chan error, 1)
	go func() { done <- tp.Serve(l) }()
	t.Cleanup(func() {
		tp.Close()
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve: %v, want ErrClosed", err)
		}
	})
	return tp
}

func mustRules(t testing.TB, allow, deny, cidrs []string) *Rules {
	t.Helper()
	r, err := ParseRules(allow, deny, cidrs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// event waits for the next audit event.
func (tp *testProxy) event(t *testing.T) Event {
	t.Helper()
	select {
	case e := <-tp.events:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no audit event")
		return Event{}
	}
}

// noMoreEvents checks that no further event arrives shortly.
func (tp *testProxy) noMoreEvents(t *testing.T) {
	t.Helper()
	select {
	case e := <-tp.events:
		t.Errorf("unexpected extra audit event: %+v", e)
	case <-time.After(100 * time.Millisecond):
	}
}

func (tp *testProxy) dials() []netip.AddrPort {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]netip.AddrPort(nil), tp.dialed...)
}

// client is an HTTP client that uses the proxy for every URL.
func (tp *testProxy) client() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:           func(*http.Request) (*url.URL, error) { return url.Parse("http://" + tp.addr) },
			TLSClientConfig: &tls.Config{RootCAs: testRoots()},
		},
		Timeout: 10 * time.Second,
	}
}

// raw sends text on a new connection to the proxy and reads one response.
func (tp *testProxy) raw(t *testing.T, text string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, text); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the response to %q: %v", text, err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// get sends "GET url" through the proxy on a new connection.
func (tp *testProxy) get(t *testing.T, url, host string) (*http.Response, string) {
	t.Helper()
	return tp.raw(t, "GET "+url+" HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
}

// connect opens a CONNECT tunnel and returns the connection after a 200.
func (tp *testProxy) connect(t *testing.T, target string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != 200 {
		c.Close()
		return nil, resp
	}
	if br.Buffered() > 0 {
		t.Fatalf("bytes after the CONNECT reply")
	}
	t.Cleanup(func() { c.Close() })
	return c, resp
}

// socks runs a SOCKS5 CONNECT with the given address type and returns the
// connection and the reply code.
func (tp *testProxy) socks(t *testing.T, atyp byte, addr []byte, port int) (net.Conn, byte) {
	t.Helper()
	return tp.socksCmd(t, socksCmdConnect, atyp, addr, port)
}

func (tp *testProxy) socksCmd(t *testing.T, cmd, atyp byte, addr []byte, port int) (net.Conn, byte) {
	t.Helper()
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte{5, 1, 0})
	var m [2]byte
	if _, err := io.ReadFull(c, m[:]); err != nil || m != [2]byte{5, 0} {
		t.Fatalf("SOCKS5 method reply %v, %v", m, err)
	}
	req := []byte{5, cmd, 0, atyp}
	if atyp == socksAtypDomain {
		req = append(req, byte(len(addr)))
	}
	req = append(req, addr...)
	req = append(req, byte(port>>8), byte(port))
	c.Write(req)
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		t.Fatalf("SOCKS5 reply: %v", err)
	}
	return c, rep[1]
}

// httpOver sends a GET over an established tunnel and returns the body.
func httpOver(t *testing.T, c net.Conn, host string) string {
	t.Helper()
	fmt.Fprintf(c, "GET /over HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET over the tunnel: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func wantEvent(t *testing.T, e Event, proto, decision, rule string) {
	t.Helper()
	if e.Proto != proto || e.Decision != decision || e.Rule != rule {
		t.Errorf("event %s/%s/%q (%s), want %s/%s/%q", e.Proto, e.Decision, e.Rule, e.Reason, proto, decision, rule)
	}
	if e.RunID != "test-run" || e.Time.IsZero() {
		t.Errorf("event without run id or time: %+v", e)
	}
}

func contains(t *testing.T, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Errorf("%q does not contain %q", s, sub)
	}
}

// tlsClient is a crypto/tls client for serverName ("" sends no SNI).
func tlsClient(c net.Conn, serverName string) *tls.Conn {
	return tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""})
}

// serveEach accepts on l until it is closed and handles each connection
// on a goroutine of its own, closing it after.
func serveEach(l net.Listener, handle func(net.Conn)) {
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}
