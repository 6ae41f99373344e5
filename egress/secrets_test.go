package egress

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// secretServer is an HTTPS destination (certificate from testCert) that
// answers with the credentials it received. The proxy puts placeholders
// in place of values in what reaches the client; what the server sent is
// in the returned log, the positive control that it got the values.
func secretServer(t *testing.T) (*echoLog, int) {
	t.Helper()
	log := new(echoLog)
	return log, tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, log.add(fmt.Sprintf("auth=%q key=%q path=%s", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), r.URL.Path)))
	})
}

// tlsServer serves h over TLS with the test certificate (names in
// testRoots) until the test ends, and returns its port.
func tlsServer(t *testing.T, h http.HandlerFunc) int {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s.Listener.Addr().(*net.TCPAddr).Port
}

// echoLog keeps what a test server sent, before the proxy scrubbed it.
type echoLog struct {
	mu   sync.Mutex
	sent []string
}

func (l *echoLog) add(s string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = append(l.sent, s)
	return s
}

// last is what the server sent last, or "".
func (l *echoLog) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.sent) == 0 {
		return ""
	}
	return l.sent[len(l.sent)-1]
}

// secretsProxy is a proxy with one bearer secret for allowed.test (GET and
// POST below /api) and one header-template secret for other.test.
func secretsProxy(t *testing.T, roots *x509.CertPool) (*testProxy, *Secrets) {
	t.Helper()
	secs, err := NewSecrets([]Secret{
		{Name: "TOKEN", Placeholder: NewPlaceholder("TOKEN"), Value: "real-token-1", Hosts: []string{"allowed.test"},
			Methods: []string{"GET", "POST"}, Paths: []string{"/api"}},
		{Name: "KEY", Placeholder: NewPlaceholder("KEY"), Value: "real-key-2", Hosts: []string{"other.test"},
			Header: "X-Api-Key: {value}"},
	}, roots)
	if err != nil {
		t.Fatal(err)
	}
	tp := newProxy(t, mustRules(t, []string{"allowed.test", "other.test", "denied.test"}, nil, loopbackCIDR))
	tp.Secrets = secs
	return tp, secs
}

// moatClient trusts only the run's CA, as a sandbox whose trust store is
// moat's would for the secrets' hosts.
func moatClient(tp *testProxy, secs *Secrets) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(secs.CACertPEM())
	return &http.Client{
		Transport: &http.Transport{
			Proxy:           func(*http.Request) (*url.URL, error) { return url.Parse("http://" + tp.addr) },
			TLSClientConfig: &tls.Config{RootCAs: pool},
		},
		Timeout: 10 * time.Second,
	}
}

func fetch(t *testing.T, c *http.Client, method, u string, hdr map[string]string) (int, string, error) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// nextOf waits for the next event of proto.
func (tp *testProxy) nextOf(t *testing.T, proto string) Event {
	t.Helper()
	for {
		if e := tp.event(t); e.Proto == proto {
			return e
		}
	}
}

func TestSecretInjectedOnlyForItsHost(t *testing.T) {
	srv, port := secretServer(t)
	tp, secs := secretsProxy(t, testRoots())
	c := moatClient(tp, secs)
	tok, key := secs.list[0].Placeholder, secs.list[1].Placeholder

	// The placeholder becomes the value on a request the secret is for
	// (and the value echoed back becomes the placeholder again).
	code, body, err := fetch(t, c, "GET", fmt.Sprintf("https://allowed.test:%d/api/user", port), map[string]string{"Authorization": "Bearer " + tok})
	if sent := srv.last(); err != nil || code != 200 || sent != `auth="Bearer real-token-1" key="" path=/api/user` || body != `auth="Bearer `+tok+`" key="" path=/api/user` {
		t.Fatalf("GET /api/user: %d %q %v, the server sent %q; want the real token at the server", code, body, err, sent)
	}
	e := tp.nextOf(t, ProtoIntercepted)
	if e.Decision != DecisionAllow || e.Method != "GET" || e.Path != "/api/user" || len(e.Secrets) != 1 || e.Secrets[0] != "TOKEN" {
		t.Errorf("event %+v: want an allowed GET /api/user with secret TOKEN", e)
	}
	if b, _ := json.Marshal(e); strings.Contains(string(b), "real-token-1") {
		t.Errorf("the secret's value is in the audit event: %s", b)
	}

	// A header template needs no placeholder at all.
	code, body, err = fetch(t, c, "GET", fmt.Sprintf("https://other.test:%d/x", port), nil)
	if sent := srv.last(); err != nil || code != 200 || sent != `auth="" key="real-key-2" path=/x` || body != `auth="" key="`+key+`" path=/x` {
		t.Fatalf("GET other.test: %d %q %v, the server sent %q; want X-Api-Key set by the proxy", code, body, err, sent)
	}

	// Outside its paths, its methods, in the URL, or to another host:
	// refused, and the value never leaves.
	for _, tc := range []struct {
		method, url string
		hdr         map[string]string
	}{
		{"GET", fmt.Sprintf("https://allowed.test:%d/other", port), map[string]string{"Authorization": "Bearer " + tok}},
		{"DELETE", fmt.Sprintf("https://allowed.test:%d/api/user", port), map[string]string{"Authorization": "Bearer " + tok}},
		{"GET", fmt.Sprintf("https://allowed.test:%d/api/x?t=%s", port, tok), nil},
		{"GET", fmt.Sprintf("https://other.test:%d/x", port), map[string]string{"Authorization": "Bearer " + tok}},
	} {
		code, body, err := fetch(t, c, tc.method, tc.url, tc.hdr)
		if err != nil || code != http.StatusForbidden || !strings.Contains(body, "secret TOKEN") || strings.Contains(body, "real-token") {
			t.Errorf("%s %s: %d %q %v; want 403 naming secret TOKEN", tc.method, tc.url, code, body, err)
		}
		// The refusal names the URL with its port.
		if want := fmt.Sprintf(":%d/", port); !strings.Contains(body, want) {
			t.Errorf("%s %s: the refusal %q does not name the port (%q)", tc.method, tc.url, body, want)
		}
	}
	// Plain HTTP never carries a placeholder, to any host.
	resp, body := tp.get(t, fmt.Sprintf("http://denied.test:%d/?k=%s", port, tok), fmt.Sprintf("denied.test:%d", port))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "HTTPS only") {
		t.Errorf("plain HTTP with the placeholder: %d %q; want 403", resp.StatusCode, body)
	}
	// Its event names the destination whole.
	if e := tp.nextOf(t, ProtoHTTP); e.Decision != DecisionDeny || e.Host != "denied.test" || e.Port != port || e.Rule != "secret placeholder" {
		t.Errorf("event of the plain request: %+v, want a refusal of denied.test:%d", e, port)
	}
}

// TestSecretHostNeedsTrustedServer: the proxy verifies the real server's
// certificate; the positive control is the test above, whose roots trust
// it.
func TestSecretHostNeedsTrustedServer(t *testing.T) {
	_, port := secretServer(t)
	tp, secs := secretsProxy(t, x509.NewCertPool())
	code, body, err := fetch(t, moatClient(tp, secs), "GET", fmt.Sprintf("https://allowed.test:%d/api", port),
		map[string]string{"Authorization": "Bearer " + secs.list[0].Placeholder})
	if err != nil || code != http.StatusBadGateway || strings.Contains(body, "real-token") {
		t.Fatalf("untrusted server: %d %q %v; want 502", code, body, err)
	}
}

// TestSecretCAIsConstrained: the run's CA signs for the secrets' hosts
// only; a client that checks name constraints refuses anything else it
// might sign.
func TestSecretCAIsConstrained(t *testing.T) {
	secs, err := NewSecrets([]Secret{{Name: "T", Placeholder: NewPlaceholder("T"), Value: "v", Hosts: []string{"allowed.test", "allowed.test:8443"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(secs.CACertPEM())
	for host, ok := range map[string]bool{"allowed.test": true, "evil.test": false} {
		leaf, err := secs.ca.leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(leaf.Certificate[0])
		_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
		if (err == nil) != ok {
			t.Errorf("verify a certificate for %s: %v, want ok=%v", host, err, ok)
		}
	}
	// Nor for an address: a certificate for one, signed with the CA's
	// key as a leaked key could, fails the constraints (a DNS name alone
	// left the addresses open).
	ca := secs.ca
	for _, ip := range []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")} {
		tmpl := &x509.Certificate{SerialNumber: serial(), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: []net.IP{ip}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(der)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool}); err == nil {
			t.Errorf("a certificate for %s verifies under the run's CA", ip)
		}
	}
	if n := strings.Count(ca.cert.Subject.CommonName, "allowed.test"); n != 1 {
		t.Errorf("the CA's name %q names the host %d times", ca.cert.Subject.CommonName, n)
	}
}

// TestSecretClientHandshakeRefused: a client that does not trust the run's
// CA, or names another host in its SNI, gets nothing through the
// interception: the tunnel's event says why, and the real server, whose
// handshake with the proxy runs alongside the client's, receives no
// request. The positive control: the same request from a client that
// trusts the CA reaches the server.
func TestSecretClientHandshakeRefused(t *testing.T) {
	var got atomic.Int32
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	s.StartTLS()
	defer s.Close()
	port := s.Listener.Addr().(*net.TCPAddr).Port
	tp, secs := secretsProxy(t, testRoots())
	u := fmt.Sprintf("https://allowed.test:%d/api", port)
	client := func(cfg *tls.Config) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			Proxy:           func(*http.Request) (*url.URL, error) { return url.Parse("http://" + tp.addr) },
			TLSClientConfig: cfg,
		}}
	}
	refused := func(what string, cfg *tls.Config, reason string) {
		t.Helper()
		if code, _, err := fetch(t, client(cfg), "GET", u, nil); err == nil {
			t.Errorf("%s: served (%d)", what, code)
		}
		e := tp.nextOf(t, ProtoConnect)
		if e.Decision != DecisionDeny || e.Rule != "tls interception" || !strings.Contains(e.Reason, reason) {
			t.Errorf("%s: event %+v", what, e)
		}
	}
	trusting := x509.NewCertPool()
	trusting.AppendCertsFromPEM(secs.CACertPEM())
	refused("a client that does not trust the CA", &tls.Config{RootCAs: x509.NewCertPool()}, "does it trust moat's CA")
	// Named for what it is, not as a CA the client may not trust.
	refused("another name in the SNI", &tls.Config{RootCAs: trusting, ServerName: "other.test"}, `named another server ("other.test") than the tunnel's`)
	if n := got.Load(); n != 0 {
		t.Fatalf("the server received %d requests from refused clients", n)
	}
	mc := moatClient(tp, secs)
	if code, _, err := fetch(t, mc, "GET", u, nil); err != nil || code != http.StatusOK || got.Load() != 1 {
		t.Errorf("control: %d %v, the server received %d requests", code, err, got.Load())
	}
	mc.CloseIdleConnections() // its tunnel's event comes as it ends
	tp.nextOf(t, ProtoIntercepted)
	tp.nextOf(t, ProtoConnect)

	// A client that closes after its handshake asked nothing: its tunnel
	// is one allowed event, with no malformed request after it.
	var sum Summary
	tc, _ := interceptedConn(t, tp, secs, fmt.Sprintf("allowed.test:%d", port))
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	tc.Close()
	e := tp.event(t)
	sum.Add(e)
	if e.Proto != ProtoConnect || e.Decision != DecisionAllow {
		t.Errorf("a tunnel closed after its handshake: %+v", e)
	}
	// A request the proxy cannot read is the client's fault, said so in
	// the run's line, not "could not reach".
	resp, _ := interceptedRaw(t, tp, secs, fmt.Sprintf("allowed.test:%d", port), "GET /api HTTP/1.1\r\nHost: allowed.test\r\nHost: other.test\r\n\r\n")
	resp.Body.Close()
	for _, proto := range []string{ProtoIntercepted, ProtoConnect} {
		sum.Add(tp.nextOf(t, proto))
	}
	if line := sum.String(); !strings.Contains(line, "could not read the client's requests to allowed.test:") || strings.Contains(line, "could not reach") {
		t.Errorf("summary %q", line)
	}
}

// TestSecretResumesServerSessions: a second intercepted connection to a
// secret's host resumes the proxy's TLS session with the real server
// rather than making a full handshake, within one run's Secrets; the
// first connection of another run's is a full one (the control: the
// server does offer resumption, and a fresh cache has nothing to resume).
func TestSecretResumesServerSessions(t *testing.T) {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "resumed=%v", r.TLS.DidResume)
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	s.StartTLS()
	defer s.Close()
	u := fmt.Sprintf("https://allowed.test:%d/api", s.Listener.Addr().(*net.TCPAddr).Port)
	get := func(tp *testProxy, secs *Secrets) string {
		t.Helper()
		c := moatClient(tp, secs)
		c.Transport.(*http.Transport).DisableKeepAlives = true // a new tunnel each time
		code, body, err := fetch(t, c, "GET", u, nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET: %d %q %v", code, body, err)
		}
		return body
	}
	tp, secs := secretsProxy(t, testRoots())
	for i, want := range []string{"resumed=false", "resumed=true", "resumed=true"} {
		if got := get(tp, secs); got != want {
			t.Errorf("connection %d: %s, want %s", i+1, got, want)
		}
	}
	tp2, secs2 := secretsProxy(t, testRoots())
	if got := get(tp2, secs2); got != "resumed=false" {
		t.Errorf("another run's first connection: %s", got)
	}
}

// interceptedRaw sends text inside a new intercepted tunnel to hostport
// (a client trusting the run's CA) and reads one response: the request
// line goes to the proxy exactly as written, which an HTTP client library
// would not promise.
func interceptedRaw(t *testing.T, tp *testProxy, secs *Secrets, hostport, text string) (*http.Response, string) {
	t.Helper()
	tc, br := interceptedConn(t, tp, secs, hostport)
	if _, err := io.WriteString(tc, text); err != nil {
		t.Fatalf("write inside the tunnel: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response to %q: %v", text, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// countingSecretServer is secretServer that also counts the requests
// that reached it with the real value of a secret in any header.
func countingSecretServer(t *testing.T, value string) (port int, got *atomic.Int32) {
	t.Helper()
	got = new(atomic.Int32)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, value) {
					got.Add(1)
				}
			}
		}
		fmt.Fprintf(w, "auth=%q path=%s", r.Header.Get("Authorization"), r.URL.EscapedPath())
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s.Listener.Addr().(*net.TCPAddr).Port, got
}

// TestSecretPathsNeedPlainPath: a secret limited by paths (and methods)
// is never sent with a path a server could read as one outside them
// (dot segments, in any encoding, encoded slashes and backslashes, empty
// segments) nor with a method-override header naming a method outside
// them: the request is refused with 403 and audited, and the server gets
// nothing. Both ways of adding a secret are checked: the placeholder
// replaced in a header, and a header template. The positive controls:
// plain paths below the prefix, with a trailing slash or a query that
// has dots, and an override naming an allowed method, get the value; a
// path that only starts with the prefix's letters does not.
func TestSecretPathsNeedPlainPath(t *testing.T) {
	for _, template := range []bool{false, true} {
		t.Run(fmt.Sprintf("template=%v", template), func(t *testing.T) {
			port, got := countingSecretServer(t, "real-token-1")
			sec := Secret{Name: "TOKEN", Placeholder: NewPlaceholder("TOKEN"), Value: "real-token-1", Hosts: []string{"allowed.test"},
				Methods: []string{"GET"}, Paths: []string{"/api"}}
			if template {
				sec.Header = "Authorization: Bearer {value}"
			}
			secs, err := NewSecrets([]Secret{sec}, testRoots())
			if err != nil {
				t.Fatal(err)
			}
			tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
			tp.Secrets = secs
			hostport := fmt.Sprintf("allowed.test:%d", port)
			send := func(target, extra string) (*http.Response, string) {
				t.Helper()
				return interceptedRaw(t, tp, secs, hostport, "GET "+target+" HTTP/1.1\r\nHost: "+hostport+
					"\r\nAuthorization: Bearer "+sec.Placeholder+"\r\n"+extra+"Connection: close\r\n\r\n")
			}

			for _, target := range []string{
				"/api/../admin", "/api/./admin", "/api/x/..", "/api/%2e%2e/admin", "/api/%2E%2e/admin",
				"/api%2F..%2Fadmin", "/api%2f..%2fadmin", "/api/%2e/admin", "/api/..%5cadmin", `/api/..\admin`,
				"/api/%252e%252e/admin", "/api//admin", "/api/..;/admin", "/api/x/%00", "/api/%C0%AE%C0%AE/admin",
				"https://allowed.test/api/../admin",
			} {
				resp, body := send(target, "")
				if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret path" || strings.Contains(body, "real-token") {
					t.Errorf("GET %s: %d %q %q; want 403 secret path", target, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), body)
				}
				e := tp.nextOf(t, ProtoIntercepted)
				wantEvent(t, e, ProtoIntercepted, DecisionDeny, "secret path")
			}
			// A CGI gateway reads "_" in a name as "-" (passed as
			// another header, found by a tester).
			for _, override := range []string{"X-HTTP-Method-Override: DELETE", "X-HTTP-Method: PUT", "X-Method-Override: delete",
				"X-HTTP-Method-Override: GET\r\nX-HTTP-Method-Override: DELETE", "X_HTTP_Method_Override: DELETE"} {
				resp, body := send("/api/x", override+"\r\n")
				if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret method" || strings.Contains(body, "real-token") {
					t.Errorf("GET /api/x with %q: %d %q %q; want 403 secret method", override, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), body)
				}
				wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionDeny, "secret method")
			}
			// A path-override header, which some servers serve instead
			// of the path (the value went with it, tried).
			for _, override := range []string{"X-Original-URL: /admin", "X-Rewrite-URL: /admin", "X-Original-URI: /api/x", "x-override-url: /", "X_Original_URL: /admin"} {
				resp, body := send("/api/x", override+"\r\n")
				if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret path" || strings.Contains(body, "real-token") {
					t.Errorf("GET /api/x with %q: %d %q %q; want 403 secret path", override, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), body)
				}
				wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionDeny, "secret path")
			}
			if n := got.Load(); n != 0 {
				t.Fatalf("the server received the value %d times from refused requests", n)
			}

			// Positive controls.
			for _, tc := range []struct{ target, extra, path string }{
				{"/api", "", "/api"},
				{"/api/x", "", "/api/x"},
				{"/api/users/", "", "/api/users/"},
				{"/api/x?next=../../admin", "", "/api/x"},
				{"/api/a%20b", "", "/api/a%20b"},
				{"/api/x", "X-HTTP-Method-Override: get\r\n", "/api/x"},
			} {
				resp, body := send(tc.target, tc.extra)
				if want := fmt.Sprintf("auth=%q path=%s", "Bearer "+sec.Placeholder, tc.path); resp.StatusCode != 200 || body != want {
					t.Errorf("GET %s: %d %q, want 200 %q", tc.target, resp.StatusCode, body, want)
				}
				if e := tp.nextOf(t, ProtoIntercepted); e.Decision != DecisionAllow || len(e.Secrets) != 1 {
					t.Errorf("GET %s: event %+v, want allowed with secret TOKEN", tc.target, e)
				}
			}
			if n := got.Load(); n != 6 {
				t.Errorf("the server received the value %d times, want 6", n)
			}

			// A prefix matches on a segment boundary: /apix is not below
			// /api. The placeholder sent there is refused; a template is
			// not added (to a request without the placeholder).
			if template {
				resp, body := interceptedRaw(t, tp, secs, hostport, "GET /apix HTTP/1.1\r\nHost: "+hostport+"\r\nConnection: close\r\n\r\n")
				if resp.StatusCode != 200 || strings.Contains(body, "real-token") {
					t.Errorf("GET /apix: %d %q, want 200 without the value", resp.StatusCode, body)
				}
			} else if resp, body := send("/apix", ""); resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" {
				t.Errorf("GET /apix: %d %q, want 403 secret placeholder", resp.StatusCode, body)
			}
			if n := got.Load(); n != 6 {
				t.Errorf("GET /apix: the server received the value")
			}
		})
	}
}

// TestSecretValueNotEchoed: a server that echoes request headers back
// cannot hand the command a secret's value through the proxy. With a
// header template the value goes in that header only, and a placeholder
// in any other header is refused (403, audited, the server gets
// nothing); the placeholder in the template's own header is replaced as
// before (the control). Either way, the value in the response's headers
// and trailers, and its body, reaches the client as the placeholder. The
// control that the server did receive, and echo, the value: what it sent,
// which it keeps.
func TestSecretValueNotEchoed(t *testing.T) {
	var got atomic.Int32
	var sent echoLog
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		id, auth, key := r.Header.Get("X-Request-Id"), r.Header.Get("Authorization"), r.Header.Get("X-Api-Key")
		w.Header().Set("X-Echo", id+"|"+auth+"|"+key)
		w.Header().Set("Trailer", "X-Echo-Trailer")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, sent.add(fmt.Sprintf("id=%s auth=%s key=%s", id, auth, key)))
		w.Header().Set("X-Echo-Trailer", id+"|"+auth+"|"+key)
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	s.StartTLS()
	defer s.Close()
	port := s.Listener.Addr().(*net.TCPAddr).Port
	tp, secs := secretsProxy(t, testRoots())
	c := moatClient(tp, secs)
	tok, key := secs.list[0].Placeholder, secs.list[1].Placeholder
	do := func(u string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	// A template secret's placeholder in another header: refused.
	for _, h := range []string{"X-Request-Id", "Authorization"} {
		resp, body := do(fmt.Sprintf("https://other.test:%d/x", port), map[string]string{h: "id " + key})
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" ||
			!strings.Contains(body, "secret KEY") || strings.Contains(body, "real-key") {
			t.Errorf("the template secret's placeholder in %s: %d %q; want 403 naming secret KEY", h, resp.StatusCode, body)
		}
		wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionDeny, "secret placeholder")
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("the server received %d refused requests", n)
	}

	// The control: the placeholder in the template's own header, and
	// none at all, get the value there; what the server echoes in
	// headers and trailers comes back as the placeholder.
	for _, hdr := range []map[string]string{{"X-Api-Key": key}, nil} {
		resp, body := do(fmt.Sprintf("https://other.test:%d/x", port), hdr)
		if resp.StatusCode != 200 || sent.last() != "id= auth= key=real-key-2" || body != "id= auth= key="+key {
			t.Fatalf("template with %v: %d %q, the server sent %q; want the value at the server", hdr, resp.StatusCode, body, sent.last())
		}
		if e, tr := resp.Header.Get("X-Echo"), resp.Trailer.Get("X-Echo-Trailer"); e != "||"+key || tr != "||"+key {
			t.Errorf("template: echoed header %q, trailer %q; want the placeholder", e, tr)
		}
	}

	// Without a template the placeholder is replaced in every header
	// the command puts it in, and the echoes come back scrubbed.
	resp, body := do(fmt.Sprintf("https://allowed.test:%d/api/x", port), map[string]string{"X-Request-Id": tok, "Authorization": "Bearer " + tok})
	if resp.StatusCode != 200 || sent.last() != "id=real-token-1 auth=Bearer real-token-1 key=" || body != "id="+tok+" auth=Bearer "+tok+" key=" {
		t.Fatalf("placeholder: %d %q, the server sent %q; want the value at the server", resp.StatusCode, body, sent.last())
	}
	want := tok + "|Bearer " + tok + "|"
	if e, tr := resp.Header.Get("X-Echo"), resp.Trailer.Get("X-Echo-Trailer"); e != want || tr != want {
		t.Errorf("placeholder: echoed header %q, trailer %q; want %q", e, tr, want)
	}
}

// TestSecretOnPort443: inside an intercepted tunnel a Host header without
// a port names 443, the default of https://, as clients send it there
// (curl, Python and Go leave ":443" out): a secret for host:443 works
// with an ordinary client. The 443 here is a loopback server on another
// port, which the proxy's dialer is pointed at. The controls: ":443"
// spelled out works too, while ":80", and a portless Host in a tunnel to
// another port, are refused as naming another port.
func TestSecretOnPort443(t *testing.T) {
	port, got := countingSecretServer(t, "real-token-1")
	secs, err := NewSecrets([]Secret{{Name: "API_TOKEN", Placeholder: NewPlaceholder("API_TOKEN"), Value: "real-token-1",
		Hosts: []string{"allowed.test:443"}, Methods: []string{"GET"}, Paths: []string{"/api"}, Header: "Authorization: Bearer {value}"}}, testRoots())
	if err != nil {
		t.Fatal(err)
	}
	tp := newProxy(t, mustRules(t, []string{"allowed.test:443"}, nil, loopbackCIDR), func(tp *testProxy) {
		inner := tp.Dial
		tp.Dial = func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
			if ap.Port() == 443 {
				ap = netip.AddrPortFrom(ap.Addr(), uint16(port))
			}
			return inner(ctx, ap)
		}
	})
	tp.Secrets = secs

	code, body, err := fetch(t, moatClient(tp, secs), "GET", "https://allowed.test/api/x", nil)
	if err != nil || code != 200 || body != `auth="Bearer `+secs.list[0].Placeholder+`" path=/api/x` || got.Load() != 1 {
		t.Fatalf("GET https://allowed.test/api/x: %d %q %v; want the value at the server", code, body, err)
	}
	if e := tp.nextOf(t, ProtoIntercepted); e.Decision != DecisionAllow || e.Port != 443 || len(e.Secrets) != 1 {
		t.Errorf("event %+v: want an allowed request to port 443 with secret API_TOKEN", e)
	}
	for host, ok := range map[string]bool{"allowed.test": true, "ALLOWED.test:443": true, "allowed.test:80": false, "allowed.test:8443": false} {
		resp, body := interceptedRaw(t, tp, secs, "allowed.test:443", "GET /api/x HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
		if ok && resp.StatusCode != 200 || !ok && (resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != "host header mismatch") {
			t.Errorf("Host %s: %d %q %q, want ok=%v", host, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), body, ok)
		}
	}
	if n := got.Load(); n != 3 {
		t.Errorf("the server received the value %d times, want 3", n)
	}

	// In an intercepted tunnel to another port, a portless Host still
	// names 443, which is not the tunnel's port.
	_, port2 := secretServer(t)
	tp2, secs2 := secretsProxy(t, testRoots())
	resp, body := interceptedRaw(t, tp2, secs2, fmt.Sprintf("allowed.test:%d", port2), "GET /api HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != "host header mismatch" {
		t.Errorf("Host allowed.test in a tunnel to port %d: %d %q", port2, resp.StatusCode, body)
	}
}

// TestSecretRefusalNeverQuotesAValue: with several secrets for one host,
// a refusal on account of one of them never quotes the value of another.
// The reason of a "secret method" refusal quotes the method-override
// header, and it goes to the command (the 403's body) and the audit
// record: when the values of the secrets earlier in the list were put in
// first, a command that sent secret A's placeholder as the override of a
// request secret B (methods GET) goes on got A's value back. Every secret
// is now decided on the request as the command sent it, before any value
// is put in. The event names only the secrets whose values the request
// carries: a placeholder in a header a template replaces is not one.
// The positive controls: the same secrets without the override reach the
// server with their values, and the value of a refused request would
// have been A's (the server echoes nothing for it: it never got it).
func TestSecretRefusalNeverQuotesAValue(t *testing.T) {
	var got echoLog
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, got.add(fmt.Sprintf("a=%s b=%s t=%s", r.Header.Get("X-A"), r.Header.Get("X-B"), r.Header.Get("X-T"))))
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	s.StartTLS()
	defer s.Close()
	hostport := fmt.Sprintf("allowed.test:%d", s.Listener.Addr().(*net.TCPAddr).Port)
	a := Secret{Name: "A", Placeholder: NewPlaceholder("A"), Value: "real-a-value", Hosts: []string{"allowed.test"}}
	b := Secret{Name: "B", Placeholder: NewPlaceholder("B"), Value: "real-b-value", Hosts: []string{"allowed.test"}, Methods: []string{"GET"}}
	tt := Secret{Name: "T", Placeholder: NewPlaceholder("T"), Value: "real-t-value", Hosts: []string{"allowed.test"}, Header: "X-T: t {value}"}
	secs, err := NewSecrets([]Secret{a, b, tt}, testRoots())
	if err != nil {
		t.Fatal(err)
	}
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	tp.Secrets = secs
	send := func(hdr string) (*http.Response, string, Event) {
		t.Helper()
		resp, body := interceptedRaw(t, tp, secs, hostport, "GET /x HTTP/1.1\r\nHost: "+hostport+"\r\n"+hdr+"Connection: close\r\n\r\n")
		return resp, body, tp.nextOf(t, ProtoIntercepted)
	}

	// A's placeholder as the override of a request B goes on.
	resp, body, e := send("X-B: " + b.Placeholder + "\r\nX-HTTP-Method-Override: " + a.Placeholder + "\r\n")
	js, _ := json.Marshal(e)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret method" {
		t.Errorf("override with A's placeholder: %d %q %q; want 403 secret method", resp.StatusCode, resp.Header.Get("X-Moat-Denied"), body)
	}
	if strings.Contains(body, "real-") || strings.Contains(string(js), "real-") {
		t.Errorf("a refusal quotes a secret's value: body %q, event %s", body, js)
	}
	if !strings.Contains(body, a.Placeholder) {
		t.Errorf("the refusal %q does not quote the override as sent (A's placeholder)", body)
	}
	if last := got.last(); last != "" {
		t.Fatalf("the server received the refused request: %q", last)
	}

	// The controls: without the override, A and B reach the server
	// with their values, and T in its header.
	resp, body, e = send("X-A: " + a.Placeholder + "\r\nX-B: " + b.Placeholder + "\r\n")
	if last := got.last(); resp.StatusCode != 200 || last != "a=real-a-value b=real-b-value t=t real-t-value" {
		t.Fatalf("A and B: %d %q, the server got %q; want every value there", resp.StatusCode, body, last)
	}
	if names := strings.Join(slices.Sorted(slices.Values(e.Secrets)), ","); e.Decision != DecisionAllow || names != "A,B,T" {
		t.Errorf("A and B: event %+v, want allowed with secrets A, B, T", e)
	}
	// A's placeholder in the header T's template replaces: only T's
	// value is sent, and only T is named.
	resp, body, e = send("X-T: " + a.Placeholder + "\r\n")
	if last := got.last(); resp.StatusCode != 200 || last != "a= b= t=t real-t-value" {
		t.Fatalf("A's placeholder in X-T: %d %q, the server got %q; want T's value only", resp.StatusCode, body, last)
	}
	if names := strings.Join(e.Secrets, ","); names != "T" {
		t.Errorf("A's placeholder in X-T: event names secrets %q, want T only (A's value was not sent)", names)
	}
}

// TestSecretEventNamesWhatWasSent: an intercepted request's event names
// the secrets whose values the server got. A value put in a hop-by-hop
// header (Proxy-Authorization, Keep-Alive), or in one the request's
// Connection header names (a template's own header too), is dropped with
// that header before the request is sent, and the event named the secret
// all the same. The controls: the same secrets in ordinary headers are
// sent and named, and a placeholder in a hop-by-hop header of a request
// to a host it is not for is still refused.
func TestSecretEventNamesWhatWasSent(t *testing.T) {
	port, got := countingSecretServer(t, "real-")
	tp, secs := secretsProxy(t, testRoots())
	tok := secs.list[0].Placeholder
	for _, tc := range []struct {
		host, hdr string
		want      string // the secret named, and sent, or ""
	}{
		{"allowed.test", "Proxy-Authorization: Bearer " + tok + "\r\n", ""},
		{"allowed.test", "Authorization: Bearer " + tok + "\r\nConnection: Authorization\r\n", ""},
		{"other.test", "Connection: X-Api-Key\r\n", ""},
		{"allowed.test", "Authorization: Bearer " + tok + "\r\n", "TOKEN"},
		{"allowed.test", "Authorization: Bearer " + tok + "\r\nKeep-Alive: " + tok + "\r\n", "TOKEN"},
		{"other.test", "", "KEY"},
	} {
		before := got.Load()
		hostport := fmt.Sprintf("%s:%d", tc.host, port)
		resp, body := interceptedRaw(t, tp, secs, hostport, "GET /api/x HTTP/1.1\r\nHost: "+hostport+"\r\n"+tc.hdr+"Connection: close\r\n\r\n")
		e := tp.nextOf(t, ProtoIntercepted)
		sent := got.Load() - before
		if resp.StatusCode != 200 || e.Decision != DecisionAllow || strings.Join(e.Secrets, ",") != tc.want || (sent > 0) != (tc.want != "") {
			t.Errorf("%s %q: %d %q, the server got a value %d times, event names %v; want it to name %q, and the server to get it",
				tc.host, tc.hdr, resp.StatusCode, body, sent, e.Secrets, tc.want)
		}
	}
	resp, body := interceptedRaw(t, tp, secs, fmt.Sprintf("other.test:%d", port),
		fmt.Sprintf("GET /x HTTP/1.1\r\nHost: other.test:%d\r\nKeep-Alive: %s\r\nConnection: close\r\n\r\n", port, tok))
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" {
		t.Errorf("TOKEN's placeholder in Keep-Alive to other.test: %d %q, want 403 secret placeholder", resp.StatusCode, body)
	}
}

// TestSecretBadRequestInsideAudited: a request inside an intercepted
// tunnel that the proxy cannot read (here with both Transfer-Encoding and
// Content-Length, the stuff of request smuggling) is audited as a request
// to the tunnel's host. Its event was a plain-HTTP one without a host,
// which a reader looking for what was refused at that host did not find.
// The controls: a readable request in the same kind of tunnel is served,
// and an unreadable request to the proxy itself is still a plain-HTTP
// event.
func TestSecretBadRequestInsideAudited(t *testing.T) {
	_, port := secretServer(t)
	tp, secs := secretsProxy(t, testRoots())
	hostport := fmt.Sprintf("allowed.test:%d", port)
	resp, body := interceptedRaw(t, tp, secs, hostport, "GET /api HTTP/1.1\r\nHost: "+hostport+"\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("TE and CL inside the tunnel: %d %q, want 400", resp.StatusCode, body)
	}
	e := tp.nextOf(t, ProtoIntercepted)
	if e.Decision != DecisionError || e.Rule != "bad request" || e.Host != "allowed.test" || e.Port != port || e.Addr == "" {
		t.Errorf("TE and CL inside the tunnel: event %+v, want a bad request to allowed.test:%d", e, port)
	}
	resp, _ = interceptedRaw(t, tp, secs, hostport, "GET /api HTTP/1.1\r\nHost: "+hostport+"\r\nConnection: close\r\n\r\n")
	if e := tp.nextOf(t, ProtoIntercepted); resp.StatusCode != 200 || e.Decision != DecisionAllow {
		t.Errorf("control inside the tunnel: %d, event %+v", resp.StatusCode, e)
	}
	resp, _ = tp.raw(t, "GET http://allowed.test/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
	if e := tp.nextOf(t, ProtoHTTP); resp.StatusCode != http.StatusBadRequest || e.Decision != DecisionError || e.Rule != "bad request" || e.Host != "" {
		t.Errorf("control at the proxy: %d, event %+v", resp.StatusCode, e)
	}
}

// TestInterceptedBytesCountedOnce: the bytes of the requests read inside
// an intercepted connection are in their own events, and the connection's
// event sums them for the report; a count over every event (the network
// budget's, Event.Spent) takes them once. The control: the connection's
// event still shows its total.
func TestInterceptedBytesCountedOnce(t *testing.T) {
	_, port := secretServer(t)
	tp, secs := secretsProxy(t, testRoots())
	c := moatClient(tp, secs)
	for range 3 {
		if code, _, err := fetch(t, c, "GET", fmt.Sprintf("https://allowed.test:%d/api/user", port), nil); err != nil || code != 200 {
			t.Fatalf("GET: %d %v", code, err)
		}
	}
	c.CloseIdleConnections()
	var inner, spent int64
	for {
		e := tp.event(t)
		spent += e.Spent()
		if e.Proto == ProtoIntercepted {
			inner += e.BytesUp + e.BytesDown
			continue
		}
		if e.Proto != ProtoConnect {
			continue
		}
		if inner == 0 || spent != inner || e.BytesUp+e.BytesDown != inner {
			t.Errorf("requests' bytes %d, counted over every event %d, the connection's event %d+%d", inner, spent, e.BytesUp, e.BytesDown)
		}
		return
	}
}
