package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var loopbackCIDR = []string{"127.0.0.0/8"}

func TestForwardAllowed(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	url := fmt.Sprintf("http://allowed.test:%d/path?q=1", s.httpPort)
	req, _ := http.NewRequest("POST", url, strings.NewReader("payload"))
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	resp, err := tp.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	want := fmt.Sprintf("hello allowed.test:%d POST /path?q=1 body=payload", s.httpPort)
	if string(body) != want {
		t.Errorf("body %q, want %q", body, want)
	}
	e := tp.event(t)
	wantEvent(t, e, ProtoHTTP, DecisionAllow, "allowed.test")
	if e.Host != "allowed.test" || e.Port != s.httpPort || e.Addr != fmt.Sprintf("127.0.0.1:%d", s.httpPort) ||
		e.BytesUp == 0 || e.BytesDown == 0 || e.Duration <= 0 {
		t.Errorf("event %+v", e)
	}
	tp.noMoreEvents(t)
}

func TestForwardDenied(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test", "other.test"}, []string{"other.test"}, loopbackCIDR))
	for _, tt := range []struct {
		host, rule, hint string
	}{
		{"denied.test", RuleDefaultDeny, `add "denied.test" to [network] allow, or --net allow:denied.test`},
		{"other.test", "other.test", `[network] deny entry "other.test"`},
	} {
		url := fmt.Sprintf("http://%s:%d/", tt.host, s.httpPort)
		resp, body := tp.get(t, url, fmt.Sprintf("%s:%d", tt.host, s.httpPort))
		if resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != tt.rule {
			t.Errorf("%s: status %d, X-Moat-Denied %q; want 403 %q", tt.host, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), tt.rule)
		}
		contains(t, body, "refused GET "+url)
		contains(t, body, tt.hint)
		wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, tt.rule)
	}
	tp.mu.Lock()
	resolved := tp.resolved
	tp.mu.Unlock()
	if len(resolved) != 0 {
		t.Errorf("refused names were looked up: %q", resolved)
	}
	if s.conns.count() != 0 {
		t.Errorf("the destination saw %d connections", s.conns.count())
	}
}

// Names that resolve to private addresses are refused unless allow_cidrs
// lists them, and nothing is dialed.
func TestPrivateAddressesRefused(t *testing.T) {
	s := startServers(t)
	rules := mustRules(t, []string{"allowed.test", "private.test", "metadata.test", "loopback6.test"}, nil, nil)
	tp := newProxy(t, rules)
	for host, rule := range map[string]string{
		"allowed.test":   "loopback address 127.0.0.1 (RFC 1122)",
		"private.test":   "private address 10.0.0.1 (RFC 1918)",
		"metadata.test":  "cloud metadata address 169.254.169.254 (link-local)",
		"loopback6.test": "loopback address ::1 (RFC 4291)",
	} {
		resp, body := tp.get(t, fmt.Sprintf("http://%s:%d/", host, s.httpPort), fmt.Sprintf("%s:%d", host, s.httpPort))
		if resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != rule {
			t.Errorf("%s: %d %q, want 403 %q", host, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), rule)
		}
		contains(t, body, "allow_cidrs")
		wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, rule)

		c, resp := tp.connect(t, fmt.Sprintf("%s:443", host))
		if c != nil || resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != rule {
			t.Errorf("CONNECT %s: %d, want 403 %q", host, resp.StatusCode, rule)
		}
		wantEvent(t, tp.event(t), ProtoConnect, DecisionDeny, rule)
	}
	if d := tp.dials(); len(d) != 0 {
		t.Errorf("dialed %v", d)
	}
	// With allow_cidrs, the loopback server is reachable.
	tp2 := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	if resp, body := tp2.get(t, fmt.Sprintf("http://allowed.test:%d/", s.httpPort), "allowed.test:"+strconv.Itoa(s.httpPort)); resp.StatusCode != 200 {
		t.Errorf("with allow_cidrs: %d %s", resp.StatusCode, body)
	}
	wantEvent(t, tp2.event(t), ProtoHTTP, DecisionAllow, "allowed.test")
}

// IP literals in any spelling are matched against allow_cidrs only.
func TestIPLiteralsRefused(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, nil))
	p := strconv.Itoa(s.httpPort)
	for _, host := range []string{"[::ffff:127.0.0.1]", "2130706433", "0177.0.0.1", "127.1", "0x7f.1", "127.0.0.1", "[::1]", "0x7f000001", "127.0.0.1."} {
		resp, body := tp.get(t, "http://"+host+":"+p+"/", host+":"+p)
		if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get("X-Moat-Denied"), "loopback address") {
			t.Errorf("%s: %d %q %s", host, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), body)
		}
		contains(t, body, "allow_cidrs")
		e := tp.event(t)
		if e.Decision != DecisionDeny || !strings.Contains(e.Rule, "loopback") {
			t.Errorf("%s: event %+v", host, e)
		}
	}
	// A public address is refused too: host entries never match addresses.
	resp, _ := tp.get(t, "http://93.184.216.34/", "93.184.216.34")
	if resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != RuleDefaultDeny {
		t.Errorf("public IP literal: %d %q", resp.StatusCode, resp.Header.Get("X-Moat-Denied"))
	}
	tp.event(t)
	if d := tp.dials(); len(d) != 0 {
		t.Errorf("dialed %v", d)
	}
	// allow_cidrs lets an unusual spelling reach the address it means.
	tp2 := newProxy(t, mustRules(t, nil, nil, loopbackCIDR))
	resp, body := tp2.get(t, "http://127.1:"+p+"/x", "127.1:"+p)
	if resp.StatusCode != 200 {
		t.Fatalf("127.1 with allow_cidrs: %d %s", resp.StatusCode, body)
	}
	if e := tp2.event(t); e.Host != "127.0.0.1" || e.Rule != "127.0.0.0/8" || e.Addr != "127.0.0.1:"+p {
		t.Errorf("event %+v", e)
	}
}

func TestConnectTLS(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	client := tp.client()
	resp, err := client.Get(fmt.Sprintf("https://allowed.test:%d/secure", s.httpsPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("hello allowed.test:%d GET /secure body=", s.httpsPort); string(body) != want {
		t.Errorf("body %q, want %q", body, want)
	}
	client.CloseIdleConnections()
	e := tp.event(t)
	wantEvent(t, e, ProtoConnect, DecisionAllow, "allowed.test")
	if e.SNI != "allowed.test" || e.BytesUp < 100 || e.BytesDown < 100 || e.Reason != "" {
		t.Errorf("event %+v", e)
	}

	// Denied CONNECT: 403 with the rule, nothing dialed.
	c, r := tp.connect(t, fmt.Sprintf("denied.test:%d", s.httpsPort))
	if c != nil || r.StatusCode != 403 || r.Header.Get("X-Moat-Denied") != RuleDefaultDeny {
		t.Errorf("CONNECT denied.test: %v", r.Status)
	}
	wantEvent(t, tp.event(t), ProtoConnect, DecisionDeny, RuleDefaultDeny)

	// No SNI (an IP server name): allowed, and the event says so.
	c, _ = tp.connect(t, fmt.Sprintf("allowed.test:%d", s.httpsPort))
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake without SNI: %v", err)
	}
	tc.Close()
	e = tp.event(t)
	wantEvent(t, e, ProtoConnect, DecisionAllow, "allowed.test")
	if e.SNI != "" || !strings.Contains(e.Reason, "without a server name") {
		t.Errorf("event %+v", e)
	}
	tp.noMoreEvents(t)
}

func TestConnectSNIMismatch(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test", "other.test"}, nil, loopbackCIDR))
	for _, sni := range []string{"denied.test", "other.test"} { // refused even when the SNI is allowed too
		c, _ := tp.connect(t, fmt.Sprintf("allowed.test:%d", s.httpsPort))
		tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: testRoots()})
		err := tc.Handshake()
		if err == nil || !strings.Contains(err.Error(), "access denied") {
			t.Errorf("SNI %s through CONNECT allowed.test: handshake error %v, want access denied", sni, err)
		}
		e := tp.event(t)
		wantEvent(t, e, ProtoConnect, DecisionDeny, "sni mismatch")
		if e.SNI != sni || !strings.Contains(e.Reason, "domain fronting") {
			t.Errorf("event %+v", e)
		}
	}
	// The same name in another case, or with a trailing dot, is the same host.
	c, _ := tp.connect(t, fmt.Sprintf("Allowed.Test.:%d", s.httpsPort))
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: testRoots()})
	if err := tc.Handshake(); err != nil {
		t.Errorf("handshake: %v", err)
	}
	tc.Close()
	wantEvent(t, tp.event(t), ProtoConnect, DecisionAllow, "allowed.test")
}

func TestSOCKS5(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	loop4 := []byte{127, 0, 0, 1}
	mapped := netip.MustParseAddr("::ffff:127.0.0.1").As16()

	c, rep := tp.socks(t, socksAtypDomain, []byte("allowed.test"), s.httpPort)
	if rep != socksSucceeded {
		t.Fatalf("domain allowed.test: reply %d", rep)
	}
	contains(t, httpOver(t, c, "allowed.test"), "hello allowed.test GET /over")
	c.Close()
	wantEvent(t, tp.event(t), ProtoSOCKS5, DecisionAllow, "allowed.test")

	if _, rep := tp.socks(t, socksAtypDomain, []byte("denied.test"), s.httpPort); rep != socksNotAllowed {
		t.Errorf("domain denied.test: reply %d, want 2", rep)
	}
	wantEvent(t, tp.event(t), ProtoSOCKS5, DecisionDeny, RuleDefaultDeny)

	c, rep = tp.socks(t, socksAtypIPv4, loop4, s.httpPort)
	if rep != socksSucceeded {
		t.Fatalf("IPv4 127.0.0.1 with allow_cidrs: reply %d", rep)
	}
	contains(t, httpOver(t, c, "x"), "hello x GET /over")
	c.Close()
	wantEvent(t, tp.event(t), ProtoSOCKS5, DecisionAllow, "127.0.0.0/8")

	c, rep = tp.socks(t, socksAtypIPv6, mapped[:], s.httpPort)
	if rep != socksSucceeded {
		t.Fatalf("IPv6 ::ffff:127.0.0.1 with allow_cidrs: reply %d", rep)
	}
	c.Close()
	wantEvent(t, tp.event(t), ProtoSOCKS5, DecisionAllow, "127.0.0.0/8")

	// Without allow_cidrs every spelling of loopback is refused.
	strict := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, nil))
	for _, tt := range []struct {
		atyp byte
		addr []byte
	}{
		{socksAtypIPv4, loop4},
		{socksAtypIPv6, mapped[:]},
		{socksAtypIPv6, netip.IPv6Loopback().AsSlice()},
		{socksAtypDomain, []byte("allowed.test")},
		{socksAtypDomain, []byte("2130706433")},
		{socksAtypDomain, []byte("[::1]")},
	} {
		if _, rep := strict.socks(t, tt.atyp, tt.addr, s.httpPort); rep != socksNotAllowed {
			t.Errorf("ATYP %d %q: reply %d, want 2", tt.atyp, tt.addr, rep)
		}
		if e := strict.event(t); e.Decision != DecisionDeny || !strings.Contains(e.Rule, "loopback") {
			t.Errorf("ATYP %d %q: event %+v", tt.atyp, tt.addr, e)
		}
	}
	if d := strict.dials(); len(d) != 0 {
		t.Errorf("dialed %v", d)
	}

	// BIND and UDP ASSOCIATE are refused with "command not supported".
	for _, cmd := range []byte{2, 3} {
		if _, rep := tp.socksCmd(t, cmd, socksAtypIPv4, []byte{0, 0, 0, 0}, 0); rep != socksCmdNotSupported {
			t.Errorf("command %d: reply %d, want 7", cmd, rep)
		}
		wantEvent(t, tp.event(t), ProtoSOCKS5, DecisionDeny, "socks5 command")
	}

	// A client that offers only username/password gets "no acceptable method".
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{5, 1, 2})
	b, _ := io.ReadAll(c)
	if !reflect.DeepEqual(b, []byte{5, 0xff}) {
		t.Errorf("auth-only greeting: reply %v", b)
	}
	wantEvent(t, tp.event(t), ProtoSOCKS5, DecisionError, "bad request")
	tp.noMoreEvents(t)
}

func TestSOCKS5IPv6Loopback(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	srv := &http.Server{Handler: helloHandler}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	tp := newProxy(t, mustRules(t, nil, nil, []string{"::1/128"}))
	c, rep := tp.socks(t, socksAtypIPv6, netip.IPv6Loopback().AsSlice(), l.Addr().(*net.TCPAddr).Port)
	if rep != socksSucceeded {
		t.Fatalf("IPv6 ::1 with allow_cidrs ::1/128: reply %d", rep)
	}
	contains(t, httpOver(t, c, "v6"), "hello v6")
	c.Close()
	wantEvent(t, tp.event(t), ProtoSOCKS5, DecisionAllow, "::1/128")
}

func TestHostHeaderMismatch(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test", "denied.test"}, nil, loopbackCIDR))
	p := strconv.Itoa(s.httpPort)
	url := "http://allowed.test:" + p + "/"
	for _, host := range []string{"denied.test:" + p, "allowed.test", "allowed.test:1", "127.0.0.1:" + p} {
		resp, body := tp.get(t, url, host)
		if resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != "host header mismatch" {
			t.Errorf("Host %s: %d %q %s", host, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), body)
		}
		wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, "host header mismatch")
	}
	resp, _ := tp.raw(t, "GET "+url+" HTTP/1.1\r\nHost: allowed.test:"+p+"\r\nHost: denied.test\r\n\r\n")
	if resp.StatusCode != 400 {
		t.Errorf("two Host headers: %d, want 400", resp.StatusCode)
	}
	wantEvent(t, tp.event(t), ProtoHTTP, DecisionError, "bad request")
	for _, host := range []string{"ALLOWED.test:" + p, "allowed.test.:" + p} {
		if resp, body := tp.get(t, url, host); resp.StatusCode != 200 {
			t.Errorf("Host %s: %d %s", host, resp.StatusCode, body)
		}
		wantEvent(t, tp.event(t), ProtoHTTP, DecisionAllow, "allowed.test")
	}
	// A default port may be left out.
	tp80 := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, nil))
	if resp, _ := tp80.get(t, "http://allowed.test/", "allowed.test:80"); resp.StatusCode != 403 ||
		!strings.Contains(resp.Header.Get("X-Moat-Denied"), "loopback") {
		t.Errorf("Host allowed.test:80 for http://allowed.test/: %d %q, want the address refusal", resp.StatusCode, resp.Header.Get("X-Moat-Denied"))
	}
}

func TestHTTPSOnly(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR), func(tp *testProxy) { tp.HTTPSOnly = true })
	resp, body := tp.get(t, fmt.Sprintf("http://allowed.test:%d/", s.httpPort), fmt.Sprintf("allowed.test:%d", s.httpPort))
	if resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != "https_only" {
		t.Errorf("plain HTTP: %d %q", resp.StatusCode, resp.Header.Get("X-Moat-Denied"))
	}
	contains(t, body, "https_only")
	wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, "https_only")

	// A plain-text protocol inside a tunnel is refused too.
	c, _ := tp.connect(t, fmt.Sprintf("allowed.test:%d", s.httpPort))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Errorf("plain HTTP in a tunnel got %q", b)
	}
	wantEvent(t, tp.event(t), ProtoConnect, DecisionDeny, "https_only")

	client := tp.client()
	r, err := client.Get(fmt.Sprintf("https://allowed.test:%d/", s.httpsPort))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	client.CloseIdleConnections()
	wantEvent(t, tp.event(t), ProtoConnect, DecisionAllow, "allowed.test")
}

func TestBadRequests(t *testing.T) {
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, nil), func(tp *testProxy) {
		tp.MaxHeaderBytes = 8 << 10
	})
	big := "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n"
	for _, tt := range []struct {
		req    string
		status int
		rule   string
	}{
		{big, 431, "header too large"},
		{"GARBAGE\r\n\r\n", 400, "bad request"},
		{"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "bad request"},
		{"GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "bad request"},
		{"GET ftp://allowed.test/ HTTP/1.1\r\n\r\n", 400, "bad request"},
		{"CONNECT allowed.test HTTP/1.1\r\n\r\n", 400, "bad request"},
		{"CONNECT /x HTTP/1.1\r\n\r\n", 400, "bad request"},
		{"GET http://allowed.test:99999/ HTTP/1.1\r\n\r\n", 403, "invalid port"},
		{"GET http://allowed.test:x/ HTTP/1.1\r\n\r\n", 400, "bad request"},
		{"GET http://a%20b/ HTTP/1.1\r\n\r\n", 400, "bad request"},
		{"GET http://allowed.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400, "bad request"},
	} {
		resp, body := tp.raw(t, tt.req)
		if resp.StatusCode != tt.status {
			t.Errorf("%.60q: %d %s, want %d", tt.req, resp.StatusCode, body, tt.status)
		}
		e := tp.event(t)
		if e.Rule != tt.rule {
			t.Errorf("%.60q: event rule %q (%s), want %q", tt.req, e.Rule, e.Reason, tt.rule)
		}
	}
	tp.noMoreEvents(t)
}

func TestSlowClients(t *testing.T) {
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, nil), func(tp *testProxy) {
		tp.HeaderTimeout = 200 * time.Millisecond
	})
	for _, start := range []string{"GET http://allowed.test/ HTTP/1.1\r\nHost: a", "\x05\x01", ""} {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(start))
		t0 := time.Now()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("%q: closed after %v", start, d)
		}
		if strings.HasPrefix(start, "GET") && !strings.HasPrefix(string(b), "HTTP/1.1 408") {
			t.Errorf("slow headers: got %q, want 408", b)
		}
		if e := tp.event(t); e.Decision != DecisionError || e.Rule != "header timeout" {
			t.Errorf("%q: event %+v", start, e)
		}
	}
	tp.noMoreEvents(t)
}

// Connections beyond MaxConns are refused at once, and the proxy serves
// again when connections end.
func TestMaxConns(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR), func(tp *testProxy) {
		tp.MaxConns = 4
	})
	var tunnels []net.Conn
	for i := 0; i < 4; i++ {
		c, _ := tp.connect(t, fmt.Sprintf("allowed.test:%d", s.httpPort))
		tunnels = append(tunnels, c)
	}
	const extra = 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]int{}
	t0 := time.Now()
	for i := 0; i < extra; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(c, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
			b, _ := io.ReadAll(c)
			status := "closed"
			if len(b) >= 12 {
				status = string(b[:12])
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("refusing %d connections took %v", extra, d)
	}
	if statuses["HTTP/1.1 503"] == 0 || statuses["HTTP/1.1 503"]+statuses["closed"] != extra {
		t.Errorf("surplus connections got %v, want 503s (or a plain close)", statuses)
	}
	for _, c := range tunnels {
		c.Close()
	}
	// Drain the events of the tunnels and of the refused connections.
	deadline := time.After(5 * time.Second)
	for n := 0; n < 4+statuses["HTTP/1.1 503"]; {
		select {
		case <-tp.events:
			n++
		case <-deadline:
			t.Fatalf("only %d events", n)
		}
	}
	// Served again once the slots are free.
	var resp *http.Response
	for i := 0; i < 50; i++ {
		resp, _ = tp.get(t, fmt.Sprintf("http://allowed.test:%d/", s.httpPort), fmt.Sprintf("allowed.test:%d", s.httpPort))
		if resp.StatusCode == 200 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp.StatusCode != 200 {
		t.Errorf("after the tunnels closed: %d", resp.StatusCode)
	}
}

// The proxy resolves once and connects only to an address it checked: a
// resolver that answers differently the second time changes nothing.
func TestDNSRebinding(t *testing.T) {
	s := startServers(t)
	var mu sync.Mutex
	calls := 0
	public := netip.MustParseAddr("93.184.216.34")
	tp := newProxy(t, mustRules(t, []string{"rebind.test"}, nil, nil), func(tp *testProxy) {
		tp.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls == 1 {
				return []netip.Addr{public}, nil
			}
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		inner := tp.Dial
		tp.Dial = func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
			if ap.Addr() == public { // stands in for the public server
				inner(ctx, ap) // recorded, refused
				return net.Dial("tcp", s.http.Listener.Addr().String())
			}
			return inner(ctx, ap)
		}
	})
	resp, body := tp.get(t, fmt.Sprintf("http://rebind.test:%d/", s.httpPort), fmt.Sprintf("rebind.test:%d", s.httpPort))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if e := tp.event(t); e.Addr != netip.AddrPortFrom(public, uint16(s.httpPort)).String() {
		t.Errorf("event addr %s", e.Addr)
	}
	// The second lookup answers loopback: refused, not dialed.
	resp, _ = tp.get(t, fmt.Sprintf("http://rebind.test:%d/", s.httpPort), fmt.Sprintf("rebind.test:%d", s.httpPort))
	if resp.StatusCode != 403 {
		t.Errorf("rebound to loopback: %d", resp.StatusCode)
	}
	tp.event(t)
	want := []netip.AddrPort{netip.AddrPortFrom(public, uint16(s.httpPort))}
	if d := tp.dials(); !reflect.DeepEqual(d, want) {
		t.Errorf("dialed %v, want %v", d, want)
	}
	if calls != 2 {
		t.Errorf("%d lookups for 2 requests", calls)
	}

	// A mixed answer: only the checked public address is dialed.
	tp2 := newProxy(t, mustRules(t, []string{"mixed.test"}, nil, nil), names(map[string][]string{
		"mixed.test": {"127.0.0.1", "10.0.0.1", "93.184.216.34"},
	}))
	tp2.get(t, "http://mixed.test/", "mixed.test")
	if e := tp2.event(t); e.Decision != DecisionError {
		t.Errorf("event %+v", e)
	}
	if d := tp2.dials(); !reflect.DeepEqual(d, []netip.AddrPort{netip.MustParseAddrPort("93.184.216.34:80")}) {
		t.Errorf("dialed %v", d)
	}
}

// Keep-alive: each forwarded request is decided on its own; requests to
// the same destination share one upstream connection.
func TestKeepAlive(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test", "other.test"}, nil, loopbackCIDR))
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	p := strconv.Itoa(s.httpPort)
	for i, host := range []string{"allowed.test", "allowed.test", "other.test", "denied.test"} {
		fmt.Fprintf(c, "GET http://%s:%s/%d HTTP/1.1\r\nHost: %s:%s\r\n\r\n", host, p, i, host, p)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		e := tp.event(t)
		if host == "denied.test" {
			if resp.StatusCode != 403 || e.Decision != DecisionDeny || !resp.Close {
				t.Errorf("request %d: %d %+v", i, resp.StatusCode, e)
			}
			continue
		}
		if want := fmt.Sprintf("hello %s:%s GET /%d", host, p, i); !strings.HasPrefix(string(b), want) {
			t.Errorf("request %d: %q, want %q", i, b, want)
		}
		wantEvent(t, e, ProtoHTTP, DecisionAllow, host)
	}
	if n := s.conns.count(); n != 2 {
		t.Errorf("%d upstream connections, want 2 (one per destination)", n)
	}
	tp.noMoreEvents(t)
}

func TestServeUnixAndClose(t *testing.T) {
	s := startServers(t)
	sock := filepath.Join(t.TempDir(), "egress.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Rules: mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR),
		Resolver: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}}
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", s.httpPort)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT over unix: %v %v", resp, err)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET over the tunnel: %v %v", resp, err)
	}
	io.ReadAll(resp.Body)
	// Close ends Serve and the open tunnel.
	p.Close()
	select {
	case err := <-done:
		if err != ErrClosed {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err == nil {
		t.Errorf("tunnel still open after Close")
	}
	if err := p.Serve(l); err != ErrClosed {
		t.Errorf("Serve after Close: %v", err)
	}
}

// A panic while serving one connection becomes an error event for it; the
// proxy goes on serving.
func TestPanicIsContained(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test", "boom.test"}, nil, loopbackCIDR), func(tp *testProxy) {
		inner := tp.Resolver
		tp.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
			if host == "boom.test" {
				panic("resolver exploded")
			}
			return inner(ctx, host)
		}
	})
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET http://boom.test/ HTTP/1.1\r\nHost: boom.test\r\n\r\n")
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.ReadAll(c)
	c.Close()
	e := tp.event(t)
	if e.Decision != DecisionError || e.Rule != "internal error" || !strings.Contains(e.Reason, "resolver exploded") || e.Host != "boom.test" {
		t.Errorf("event %+v", e)
	}
	if resp, _ := tp.get(t, fmt.Sprintf("http://allowed.test:%d/", s.httpPort), fmt.Sprintf("allowed.test:%d", s.httpPort)); resp.StatusCode != 200 {
		t.Errorf("after the panic: %d", resp.StatusCode)
	}
	tp.event(t)
}

func TestEventJSONAndSummary(t *testing.T) {
	e := Event{Time: time.Unix(0, 0).UTC(), RunID: "r", Proto: ProtoConnect, Host: "a.test", Port: 443,
		Addr: "1.2.3.4:443", SNI: "a.test", Decision: DecisionAllow, Rule: "a.test", BytesUp: 1, BytesDown: 2, Duration: 3}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"time", "run_id", "proto", "host", "port", "addr", "sni", "decision", "rule", "bytes_up", "bytes_down", "duration_ns"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON %s has no %q", b, k)
		}
	}
	var s Summary
	if s.String() != "" {
		t.Errorf("empty summary %q", s.String())
	}
	s.Add(Event{Decision: DecisionAllow})
	for i := 0; i < 2; i++ {
		s.Add(Event{Decision: DecisionDeny, Host: "denied.test", Port: 443, Rule: RuleDefaultDeny})
	}
	s.Add(Event{Decision: DecisionDeny, Host: "10.0.0.1", Port: 80, Rule: "private address 10.0.0.1 (RFC 1918)"})
	s.Add(Event{Decision: DecisionError})
	want := "network: refused denied.test:443 ×2 (default deny), 10.0.0.1:80 (private address 10.0.0.1 (RFC 1918)); 1 allowed, 1 failed"
	if s.String() != want {
		t.Errorf("summary\n%q, want\n%q", s.String(), want)
	}
	for i := 0; i < 2; i++ {
		s.Add(Event{Decision: DecisionError, Proto: ProtoConnect, Host: "gone.test", Port: 443, Rule: "gone.test", Reason: "resolve gone.test: no such host"})
	}
	s.Add(Event{Decision: DecisionError, Proto: ProtoDNS, Host: "many.test", Rule: "dns rate"})
	want = "network: refused denied.test:443 ×2 (default deny), 10.0.0.1:80 (private address 10.0.0.1 (RFC 1918)); could not reach gone.test:443 ×2 (resolve gone.test: no such host), many.test (DNS) (dns rate); 1 allowed, 4 failed"
	if s.String() != want {
		t.Errorf("summary\n%q, want\n%q", s.String(), want)
	}

	// Failures alone make a line too: a client such as curl shows a
	// tunnel's 502, not why.
	var f Summary
	f.Add(Event{Decision: DecisionAllow})
	f.Add(Event{Decision: DecisionError, Rule: "bad request"})
	if f.String() != "" {
		t.Errorf("a failure that named no destination made a line: %q", f.String())
	}
	f.Add(Event{Decision: DecisionError, Proto: ProtoConnect, Host: "gone.test", Port: 443, Reason: "resolve gone.test: no such host"})
	want = "network: could not reach gone.test:443 (resolve gone.test: no such host); 1 allowed, 2 failed"
	if f.String() != want {
		t.Errorf("summary of a failure\n%q, want\n%q", f.String(), want)
	}
}

// Audit: exactly one event per attempt, with the right decision and rule,
// over a mix of protocols.
func TestAuditOnePerAttempt(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, []string{"denied.test"}, loopbackCIDR))
	p := strconv.Itoa(s.httpPort)
	tp.get(t, "http://allowed.test:"+p+"/", "allowed.test:"+p)
	tp.get(t, "http://denied.test:"+p+"/", "denied.test:"+p)
	tp.get(t, "http://nowhere.test:"+p+"/", "nowhere.test:"+p)
	c, _ := tp.connect(t, "allowed.test:"+p)
	httpOver(t, c, "allowed.test")
	c.Close()
	tp.connect(t, "denied.test:"+p)
	tp.socks(t, socksAtypDomain, []byte("denied.test"), 80)
	c, _ = tp.socks(t, socksAtypDomain, []byte("allowed.test"), s.httpPort)
	c.Close()
	tp.raw(t, "BAD\r\n\r\n")
	allowNX := newProxy(t, mustRules(t, []string{"nx.test"}, nil, nil))
	allowNX.get(t, "http://nx.test/", "nx.test")
	want := [][3]string{
		{ProtoHTTP, DecisionAllow, "allowed.test"},
		{ProtoHTTP, DecisionDeny, "denied.test"},
		{ProtoHTTP, DecisionDeny, RuleDefaultDeny},
		{ProtoConnect, DecisionAllow, "allowed.test"},
		{ProtoConnect, DecisionDeny, "denied.test"},
		{ProtoSOCKS5, DecisionDeny, "denied.test"},
		{ProtoSOCKS5, DecisionAllow, "allowed.test"},
		{ProtoHTTP, DecisionError, "bad request"},
	}
	// Tunnels report when they close, so the order may differ.
	var got, wantS []string
	for _, w := range want {
		e := tp.event(t)
		if e.RunID != "test-run" || e.Time.IsZero() || e.Reason == "" && e.Decision != DecisionAllow {
			t.Errorf("event %+v", e)
		}
		got = append(got, e.Proto+"/"+e.Decision+"/"+e.Rule)
		wantS = append(wantS, w[0]+"/"+w[1]+"/"+w[2])
	}
	sort.Strings(got)
	sort.Strings(wantS)
	if !reflect.DeepEqual(got, wantS) {
		t.Errorf("events\n%q, want\n%q", got, wantS)
	}
	tp.noMoreEvents(t)
	e := allowNX.event(t)
	if e.Decision != DecisionError || !strings.Contains(e.Reason, "no such host") {
		t.Errorf("unresolvable name: event %+v", e)
	}
	allowNX.noMoreEvents(t)
}

const banner = "220 banner.test ESMTP\r\n"

// bannerServer starts a loopback server that greets every connection
// before reading anything, as SMTP and SSH servers do, and returns its
// port.
func bannerServer(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	serveEach(l, func(c net.Conn) {
		io.WriteString(c, banner)
		io.Copy(io.Discard, c)
	})
	return l.Addr().(*net.TCPAddr).Port
}

// With https_only, nothing from the destination reaches a client before
// its first bytes were checked as a TLS ClientHello, so a server that
// speaks first cannot send plain text out, whether the client waits or
// half-closes. Without https_only the banner comes through.
func TestHTTPSOnlyServerSpeaksFirst(t *testing.T) {
	port := bannerServer(t)
	target := fmt.Sprintf("allowed.test:%d", port)
	rules := mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR)
	// open returns the tunnel, and a reader of it that has whatever came
	// with the proxy's reply.
	open := func(tp *testProxy, proto string) (*net.TCPConn, io.Reader) {
		if proto == ProtoSOCKS5 {
			c, rep := tp.socks(t, socksAtypDomain, []byte("allowed.test"), port)
			if rep != socksSucceeded {
				t.Fatalf("SOCKS5 %s: reply %d", target, rep)
			}
			return c.(*net.TCPConn), c
		}
		c, br, resp := tp.connectWith(t, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
		if c == nil {
			t.Fatalf("CONNECT %s: %s", target, resp.Status)
		}
		return c.(*net.TCPConn), br
	}

	plain := newProxy(t, rules)
	for _, proto := range []string{ProtoConnect, ProtoSOCKS5} {
		c, r := open(plain, proto)
		b := make([]byte, len(banner))
		if _, err := io.ReadFull(r, b); err != nil || string(b) != banner {
			t.Errorf("%s without https_only: read %q, %v; want the banner", proto, b, err)
		}
		c.Close()
		wantEvent(t, plain.event(t), proto, DecisionAllow, "allowed.test")
	}

	strict := newProxy(t, rules, func(tp *testProxy) {
		tp.HTTPSOnly = true
		tp.HeaderTimeout = 300 * time.Millisecond
	})
	for _, proto := range []string{ProtoConnect, ProtoSOCKS5} {
		for _, halfClose := range []bool{false, true} {
			c, r := open(strict, proto)
			t0 := time.Now()
			if halfClose {
				c.CloseWrite()
			}
			b, _ := io.ReadAll(r)
			c.Close()
			if len(b) != 0 {
				t.Errorf("%s with https_only (half-closed %v): the client got %q", proto, halfClose, b)
			}
			if d := time.Since(t0); d > 2*time.Second {
				t.Errorf("%s with https_only (half-closed %v): closed after %v", proto, halfClose, d)
			}
			e := strict.event(t)
			wantEvent(t, e, proto, DecisionDeny, "https_only")
			if e.BytesDown != 0 || !strings.Contains(e.Reason, "ClientHello") {
				t.Errorf("%s with https_only (half-closed %v): event %+v", proto, halfClose, e)
			}
		}
	}
	strict.noMoreEvents(t)
}

// connectWith sends a CONNECT request as written and returns the reply
// and, when the tunnel is open, the connection and a reader of it that
// has what came after the reply.
func (tp *testProxy) connectWith(t *testing.T, req string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, req)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	if resp.StatusCode != 200 {
		c.Close()
		return nil, nil, resp
	}
	return c, br, resp
}

// A CONNECT request's Host header must name the tunnel's target, as a
// forwarded request's must name its URL's host and port.
func TestConnectHostHeader(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test", "denied.test"}, nil, loopbackCIDR))
	p := strconv.Itoa(s.httpsPort)
	target := "allowed.test:" + p
	for _, host := range []string{"denied.test:" + p, "allowed.test:1", "127.0.0.1:" + p, "allowed.test"} {
		c, _, resp := tp.connectWith(t, "CONNECT "+target+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		if c != nil || resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != "host header mismatch" {
			t.Errorf("CONNECT %s with Host %s: %d %q", target, host, resp.StatusCode, resp.Header.Get("X-Moat-Denied"))
		}
		e := tp.event(t)
		wantEvent(t, e, ProtoConnect, DecisionDeny, "host header mismatch")
		contains(t, e.Reason, host)
	}
	if d := tp.dials(); len(d) != 0 {
		t.Errorf("dialed %v", d)
	}
	// The same host and port in another spelling, or no Host header at
	// all, opens the tunnel.
	for _, hdr := range []string{"Host: " + target + "\r\n", "Host: ALLOWED.test.:" + p + "\r\n", ""} {
		c, _, resp := tp.connectWith(t, "CONNECT "+target+" HTTP/1.1\r\n"+hdr+"\r\n")
		if c == nil {
			t.Errorf("CONNECT %s with %q: %s", target, hdr, resp.Status)
			tp.event(t)
			continue
		}
		tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: testRoots()})
		if err := tc.Handshake(); err != nil {
			t.Errorf("CONNECT %s with %q: handshake: %v", target, hdr, err)
		}
		tc.Close()
		wantEvent(t, tp.event(t), ProtoConnect, DecisionAllow, "allowed.test")
	}
	tp.noMoreEvents(t)
}

// A single-label name (a compose or Kubernetes service) is allowed only
// when allow_cidrs lists every address it resolves to, and then with no
// further check; any other address, public or not, refuses it undialed.
func TestSingleLabelName(t *testing.T) {
	s := startServers(t)
	resolve := names(map[string][]string{
		"db":    {"127.0.0.1"},
		"mixed": {"127.0.0.1", "10.0.0.1"},
		"pub":   {"8.8.8.8"},
	})
	tp := newProxy(t, mustRules(t, []string{"db", "mixed", "pub"}, nil, loopbackCIDR), resolve)
	if resp, body := tp.get(t, fmt.Sprintf("http://db:%d/", s.httpPort), "db:"+strconv.Itoa(s.httpPort)); resp.StatusCode != 200 {
		t.Errorf("db within allow_cidrs: %d %s", resp.StatusCode, body)
	}
	wantEvent(t, tp.event(t), ProtoHTTP, DecisionAllow, "db")
	for _, host := range []string{"mixed", "pub"} {
		resp, body := tp.get(t, fmt.Sprintf("http://%s:%d/", host, s.httpPort), fmt.Sprintf("%s:%d", host, s.httpPort))
		if resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != RuleLocalName {
			t.Errorf("%s: %d %q, want 403 %q", host, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), RuleLocalName)
		}
		contains(t, body, "allow_cidrs")
		wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, RuleLocalName)
	}
	// Without allow_cidrs, db (on loopback) is refused.
	tp2 := newProxy(t, mustRules(t, []string{"db"}, nil, nil), resolve)
	resp, body := tp2.get(t, fmt.Sprintf("http://db:%d/", s.httpPort), "db:"+strconv.Itoa(s.httpPort))
	if resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != RuleLocalName {
		t.Errorf("db outside allow_cidrs: %d %q, want 403 %q", resp.StatusCode, resp.Header.Get("X-Moat-Denied"), RuleLocalName)
	}
	contains(t, body, "add its range")
	wantEvent(t, tp2.event(t), ProtoHTTP, DecisionDeny, RuleLocalName)
	for _, d := range append(tp.dials(), tp2.dials()...) {
		if d.Addr() != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("dialed %v", d)
		}
	}
	if n := len(tp2.dials()); n != 0 {
		t.Errorf("db outside allow_cidrs: %d dials", n)
	}
}

// A response whose body comes in pieces over time (no length, or an
// event stream) reaches the client piece by piece through the proxy: the
// first event waited in the proxy's buffer until the body ended before.
// The control: the whole body arrives too.
func TestStreamingResponseFlushed(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		io.WriteString(w, "data: second\n\n")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	resp, err := tp.client().Get(fmt.Sprintf("http://allowed.test:%d/events", port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make(chan string, 1)
	go func() {
		b := make([]byte, len("data: first\n\n"))
		n, _ := io.ReadFull(resp.Body, b)
		got <- string(b[:n])
	}()
	select {
	case s := <-got:
		if s != "data: first\n\n" {
			t.Errorf("first event %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the first event did not arrive while the stream was open")
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "data: second\n\n" {
		t.Errorf("the rest: %q", rest)
	}
}

// A tunnel still open when the proxy closes (a background process holds
// it past the end of its run) is in the events by the time Close
// returns, with the bytes it carried: the run's report and audit stream
// are written right after (it was missing from them, found by a tester).
// The control: the tunnel is open, and has no event, before Close.
func TestCloseRecordsOpenTunnels(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan int, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 5)
		n, _ := io.ReadFull(c, b)
		got <- n
		io.Copy(io.Discard, c)
	}()
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	_, port, _ := net.SplitHostPort(l.Addr().String())
	c, r := tp.connect(t, "allowed.test:"+port)
	if c == nil {
		t.Fatalf("CONNECT: %v", r.Status)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if n := <-got; n != 5 {
		t.Fatalf("server read %d bytes", n)
	}
	select {
	case e := <-tp.events:
		t.Fatalf("an event while the tunnel is open: %+v", e)
	default:
	}
	tp.Close()
	select {
	case e := <-tp.events:
		wantEvent(t, e, ProtoConnect, DecisionAllow, "allowed.test")
		if e.BytesUp != 5 {
			t.Errorf("event %+v, want 5 bytes up", e)
		}
	default:
		t.Fatal("Close returned before the open tunnel's event")
	}
}

// A forwarded request still waiting for its answer when the proxy
// closes (the run ended) was sent: its event is an allowed one that says
// it was cut off, not a destination that could not be reached (found by
// a tester). The control: the same request answered is allowed with no
// reason.
func TestCloseCutsAForwardedRequest(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.Path
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	resp, _ := tp.raw(t, "GET http://allowed.test:"+port+"/fast HTTP/1.1\r\nHost: allowed.test:"+port+"\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("control: %d", resp.StatusCode)
	}
	if e := tp.event(t); e.Decision != DecisionAllow || e.Reason != "" {
		t.Errorf("control: event %+v", e)
	}
	<-got
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://allowed.test:%s/slow HTTP/1.1\r\nHost: allowed.test:%s\r\n\r\n", port, port)
	if p := <-got; p != "/slow" {
		t.Fatalf("server got %q", p)
	}
	tp.Close()
	select {
	case e := <-tp.events:
		if e.Decision != DecisionAllow || e.Reason != cutAtEnd {
			t.Errorf("event %+v, want allowed and cut off", e)
		}
	default:
		t.Fatal("no event by the time Close returned")
	}
}

// TestStreamingResponseNotChunked: a streamed response whose body is not
// chunked (delimited by the connection's close, or an event stream with
// a length, or any body to an HTTP/1.0 client) reaches the client whole
// and intact: the flush of a streamed response in the middle of the
// buffer's ReadFrom sent the response's header in the body's place
// (found by a tester). The control: the same body with a length.
func TestStreamingResponseNotChunked(t *testing.T) {
	body := strings.Repeat("0123456789abcdef", 4096) + "end\n"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				switch req.URL.Path {
				case "/close":
					io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n")
				case "/events":
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n", len(body))
				default:
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", len(body))
				}
				for rest := body; rest != ""; {
					n := min(len(rest), 1000)
					io.WriteString(c, rest[:n])
					rest = rest[n:]
				}
			}()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	for _, path := range []string{"/close", "/events", "/length"} {
		resp, err := tp.client().Get(fmt.Sprintf("http://allowed.test:%d%s", port, path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(got) != body {
			t.Errorf("%s: %d bytes %v, begins %.60q, want the body whole", path, len(got), err, got)
		}
	}
}
