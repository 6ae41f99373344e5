package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// seenServer is an HTTPS destination that records, for each request, its
// headers, body and trailers as they arrived, so that a test can tell
// what the proxy let out.
type seenServer struct {
	port int
	mu   sync.Mutex
	reqs []string
}

func newSeenServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *seenServer {
	t.Helper()
	s := new(seenServer)
	s.port = tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, fmt.Sprintf("url=%s user=%v header=%v body=%q trailer=%v", r.URL, r.URL.User, r.Header, body, r.Trailer))
		s.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		io.WriteString(w, "ok")
	})
	return s
}

// all is everything the server received so far.
func (s *seenServer) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.reqs, "\n")
}

// since is what the server received after its first n requests.
func (s *seenServer) since(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.reqs[n:], "\n")
}

func (s *seenServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// interceptedConn opens an intercepted tunnel to hostport, trusting the
// run's CA, for a test that writes the request itself in several steps.
func interceptedConn(t *testing.T, tp *testProxy, secs *Secrets, hostport string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, resp := tp.connect(t, hostport)
	if c == nil {
		t.Fatalf("CONNECT %s: %d", hostport, resp.StatusCode)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(secs.CACertPEM())
	host, _, _ := net.SplitHostPort(hostport)
	tc := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: host})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	return tc, bufio.NewReader(tc)
}

// TestSecretUserinfoRefused: a placeholder in the user information of an
// absolute-form request URL was dropped with the user information,
// silently, where a placeholder anywhere else the secret does not go is
// refused. It is now refused (403, audited, the server gets nothing):
// over plain HTTP, inside a tunnel to a host the secret is not for, and
// inside a tunnel to its own host too, since clients turn a URL's user
// information into Basic credentials rather than send it, and moat adds
// secrets to headers only. The control: the same placeholder in the
// Authorization header on the secret's host is replaced, and the server
// gets the value; a URL with user information but no placeholder is
// still forwarded, without it.
func TestSecretUserinfoRefused(t *testing.T) {
	srv := newSeenServer(t, nil)
	tp, secs := secretsProxy(t, testRoots())
	tok := secs.list[0].Placeholder
	port := srv.port

	resp, body := tp.raw(t, fmt.Sprintf("GET http://u:%s@denied.test:%d/ HTTP/1.1\r\nHost: denied.test:%d\r\nConnection: close\r\n\r\n", tok, port, port))
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" || !strings.Contains(body, "secret TOKEN in the user information") {
		t.Errorf("plain HTTP with the placeholder in the user information: %d %q; want 403 naming secret TOKEN", resp.StatusCode, body)
	}
	wantEvent(t, tp.nextOf(t, ProtoHTTP), ProtoHTTP, DecisionDeny, "secret placeholder")

	for _, tc := range []struct{ host, path string }{
		{"allowed.test", "/api/x"},
		{"other.test", "/x"},
	} {
		hostport := fmt.Sprintf("%s:%d", tc.host, port)
		for _, user := range []string{"u:" + tok, tok, "u:" + strings.ReplaceAll(tok, "-", "%2D")} {
			resp, body := interceptedRaw(t, tp, secs, hostport, fmt.Sprintf("GET https://%s@%s%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", user, hostport, tc.path, hostport))
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" || !strings.Contains(body, "secret TOKEN") ||
				strings.Contains(body, "real-") {
				t.Errorf("%s with %q in the user information: %d %q; want 403 naming secret TOKEN", tc.host, user, resp.StatusCode, body)
			}
			e := tp.nextOf(t, ProtoIntercepted)
			wantEvent(t, e, ProtoIntercepted, DecisionDeny, "secret placeholder")
			contains(t, e.Reason, "user information")
		}
	}
	if n := srv.count(); n != 0 {
		t.Fatalf("the server received %d refused requests: %s", n, srv.all())
	}

	// The controls.
	hostport := fmt.Sprintf("allowed.test:%d", port)
	resp, body = interceptedRaw(t, tp, secs, hostport, fmt.Sprintf("GET /api/x HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", hostport, tok))
	if got := srv.all(); resp.StatusCode != 200 || !strings.Contains(got, "Bearer real-token-1") {
		t.Errorf("the placeholder in Authorization: %d %q, the server got %q; want the value there", resp.StatusCode, body, got)
	}
	wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionAllow, "")
	resp, body = interceptedRaw(t, tp, secs, hostport, fmt.Sprintf("GET https://u:pw@%s/api/y HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport, hostport))
	if got := srv.all(); resp.StatusCode != 200 || !strings.Contains(got, "url=/api/y user= ") {
		t.Errorf("user information without a placeholder: %d %q, the server got %q; want it forwarded without the user information", resp.StatusCode, body, got)
	}
	wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionAllow, "")
}

// chunked is a chunked request body "hello" ending with the trailer
// lines given.
func chunked(trailers string) string {
	return "5\r\nhello\r\n0\r\n" + trailers + "\r\n"
}

// TestSecretRequestTrailers: request trailers (after a chunked body)
// were sent on unchecked, so a placeholder there reached hosts it is not
// for. Now a placeholder in a trailer's value is decided as one in a
// header: on a request the secret is for, replaced, and the server gets
// the value (the control); anywhere else refused (403, audited) and the
// trailers never sent. Also refused: a placeholder in a trailer's name
// or a trailer's Basic credentials, a template secret's placeholder in
// a trailer, trailers the request did not declare, and any placeholder
// in a plain-HTTP request's trailers, whose control is a trailer without
// one, forwarded.
func TestSecretRequestTrailers(t *testing.T) {
	srv := newSeenServer(t, nil)
	tp, secs := secretsProxy(t, testRoots())
	tok, key := secs.list[0].Placeholder, secs.list[1].Placeholder
	port := srv.port

	send := func(host, path, hdr, trailers string) (*http.Response, string) {
		t.Helper()
		hostport := fmt.Sprintf("%s:%d", host, port)
		return interceptedRaw(t, tp, secs, hostport, "POST "+path+" HTTP/1.1\r\nHost: "+hostport+"\r\nTransfer-Encoding: chunked\r\n"+hdr+"Connection: close\r\n\r\n"+chunked(trailers))
	}

	// The control: a placeholder in a declared trailer on a request the
	// secret is for.
	resp, body := send("allowed.test", "/api/x", "Trailer: X-Sig\r\n", "X-Sig: Bearer "+tok+"\r\n")
	if got := srv.all(); resp.StatusCode != 200 || !strings.Contains(got, `trailer=map[X-Sig:[Bearer real-token-1]]`) || !strings.Contains(got, `body="hello"`) {
		t.Fatalf("the placeholder in a trailer to its host: %d %q, the server got %q; want the value in the trailer", resp.StatusCode, body, got)
	}
	if e := tp.nextOf(t, ProtoIntercepted); e.Decision != DecisionAllow || strings.Join(e.Secrets, ",") != "TOKEN" {
		t.Errorf("the placeholder in a trailer to its host: event %+v, want allowed naming TOKEN", e)
	}

	// A trailer the request did not declare is not sent (net/http's
	// Request.Write sends declared ones only), and the event does not
	// claim it.
	before := srv.count()
	resp, body = send("allowed.test", "/api/x", "", "X-Sig: Bearer "+tok+"\r\n")
	if got := srv.since(before); resp.StatusCode != 200 || !strings.Contains(got, "trailer=map[]") {
		t.Errorf("an undeclared trailer to its host: %d %q, the server got %q; want no trailer", resp.StatusCode, body, got)
	}
	if e := tp.nextOf(t, ProtoIntercepted); e.Decision != DecisionAllow || len(e.Secrets) != 0 {
		t.Errorf("an undeclared trailer to its host: event %+v, want allowed naming no secret", e)
	}

	for _, tc := range []struct{ host, path, hdr, trailers, name string }{
		{"other.test", "/x", "Trailer: X-Sig\r\n", "X-Sig: Bearer " + tok + "\r\n", "secret TOKEN"},
		{"allowed.test", "/elsewhere", "Trailer: X-Sig\r\n", "X-Sig: Bearer " + tok + "\r\n", "secret TOKEN"},
		{"other.test", "/x", "Trailer: X-Sig\r\n", "X-Sig: " + key + "\r\n", "secret KEY"},
		{"other.test", "/x", "", "X-Sig: " + tok + "\r\n", "secret TOKEN"},
		{"allowed.test", "/api/x", "Trailer: " + tok + "\r\n", tok + ": x\r\n", "secret TOKEN"},
		{"allowed.test", "/api/x", "Trailer: X-Auth\r\n", "X-Auth: " + basicAuth("u", tok) + "\r\n", "secret TOKEN"},
	} {
		before := srv.count()
		resp, body := send(tc.host, tc.path, tc.hdr, tc.trailers)
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" || !strings.Contains(body, tc.name) ||
			!strings.Contains(body, "trailer") || strings.Contains(body, "real-") {
			t.Errorf("%s%s with trailers %q: %d %q; want 403 naming %s in a trailer", tc.host, tc.path, tc.trailers, resp.StatusCode, body, tc.name)
		}
		wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionDeny, "secret placeholder")
		// The server may have seen the request begin; never its
		// trailers.
		time.Sleep(50 * time.Millisecond)
		if got := srv.since(before); got != "" && (strings.Contains(strings.ToLower(got), strings.ToLower(tok)) || strings.Contains(got, key) || strings.Contains(got, "real-token")) {
			t.Errorf("%s%s with trailers %q: the server got %q", tc.host, tc.path, tc.trailers, got)
		}
	}

	// Plain HTTP.
	var plainMu sync.Mutex
	var plainGot []string
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		plainMu.Lock()
		plainGot = append(plainGot, fmt.Sprint(r.Trailer))
		plainMu.Unlock()
	}))
	defer plain.Close()
	pport := plain.Listener.Addr().(*net.TCPAddr).Port
	post := func(trailers string) (*http.Response, string) {
		return tp.raw(t, fmt.Sprintf("POST http://denied.test:%d/ HTTP/1.1\r\nHost: denied.test:%d\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sig\r\nConnection: close\r\n\r\n%s",
			pport, pport, chunked(trailers)))
	}
	resp, body = post("X-Sig: " + tok + "\r\n")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "secret TOKEN in the X-Sig trailer") {
		t.Errorf("plain HTTP with the placeholder in a trailer: %d %q; want 403", resp.StatusCode, body)
	}
	wantEvent(t, tp.nextOf(t, ProtoHTTP), ProtoHTTP, DecisionDeny, "secret placeholder")
	resp, body = post("X-Sig: own\r\n")
	time.Sleep(50 * time.Millisecond)
	plainMu.Lock()
	got := strings.Join(plainGot, "\n")
	plainMu.Unlock()
	if resp.StatusCode != 200 || !strings.Contains(got, "map[X-Sig:[own]]") || strings.Contains(got, tok) {
		t.Errorf("plain HTTP: %d %q, the server got trailers %q; want the placeholder's never, the other's forwarded", resp.StatusCode, body, got)
	}
	if e := tp.nextOf(t, ProtoHTTP); e.Decision != DecisionAllow {
		t.Errorf("plain HTTP with a trailer: event %+v, want allowed", e)
	}
}

// TestSecretResponseTrailersScrubbed: what a server sends in response
// trailers never hands the command a secret's value: a declared trailer
// comes back with the placeholder in the value's place, as does one the
// response did not declare (net/http's TrailerPrefix, relayed with the
// declared ones). So does a value in a trailer's name, which net/http
// reads in canonical case, changing the value's case, and which the
// scrubber therefore matches without regard to case: it used to come
// back as is; so did one in a header's name. The control is the server's own record that it got the
// value and sent it back.
func TestSecretResponseTrailersScrubbed(t *testing.T) {
	var mu sync.Mutex
	var sentBack string
	srv := newSeenServer(t, func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.Header().Set("Trailer", "X-Echo, X-Name-"+strings.TrimPrefix(auth, "Bearer "))
		w.Header().Set("X-Header-"+strings.TrimPrefix(auth, "Bearer "), "v")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "body")
		w.Header().Set("X-Echo", auth)
		w.Header().Set("X-Name-"+strings.TrimPrefix(auth, "Bearer "), "v")
		w.Header().Set(http.TrailerPrefix+"X-Late", auth)
		mu.Lock()
		sentBack = auth
		mu.Unlock()
	})
	tp, secs := secretsProxy(t, testRoots())
	tok := secs.list[0].Placeholder
	hostport := fmt.Sprintf("allowed.test:%d", srv.port)
	c, _ := interceptedConn(t, tp, secs, hostport)
	defer c.Close()
	fmt.Fprintf(c, "GET /api/x HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", hostport, tok)
	raw, err := io.ReadAll(c)
	mu.Lock()
	sent := sentBack
	mu.Unlock()
	if sent != "Bearer real-token-1" {
		t.Fatalf("the server sent back %q (read %q, %v); want the value", sent, raw, err)
	}
	if strings.Contains(strings.ToLower(string(raw)), "real-token-1") {
		t.Errorf("the value reached the client: %q", raw)
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(raw))), nil)
	if err != nil {
		t.Fatalf("reading %q: %v", raw, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "body" || resp.Trailer.Get("X-Echo") != "Bearer "+tok || resp.Trailer.Get("X-Name-"+tok) != "v" || resp.Trailer.Get("X-Late") != "Bearer "+tok ||
		resp.Header.Get("X-Header-"+tok) != "v" {
		t.Errorf("response %q, headers %v, trailers %v; want X-Echo, X-Late, X-Name-<placeholder> and X-Header-<placeholder> with the placeholder", body, resp.Header, resp.Trailer)
	}
	wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionAllow, "")
}

// TestSecretEncodedPlaceholderRefused: a placeholder percent-encoded in
// a request's path or query ("moat%2Dsecret-..."), which a server decodes
// back into it, or in a header's name, which net/http sends in canonical
// case, went out unseen, inside a tunnel to a host the secret is not for
// and over plain HTTP alike: the proxy looked for it as sent, and in
// header values only. Both are now refused (403, audited), decoded
// twice over, as some servers decode. The controls: the placeholder in
// Authorization on the secret's host, with an encoded path of its own,
// is replaced, and the server gets the value.
func TestSecretEncodedPlaceholderRefused(t *testing.T) {
	srv := newSeenServer(t, nil)
	tp, secs := secretsProxy(t, testRoots())
	tok := secs.list[0].Placeholder
	enc := strings.ReplaceAll(tok, "-", "%2D")
	enc2 := strings.ReplaceAll(tok, "-", "%252d")
	port := srv.port

	for _, tc := range []struct{ host, target, hdr string }{
		{"other.test", "/x/" + enc, ""},
		{"other.test", "/x/" + enc2, ""},
		{"other.test", "/x?k=" + enc, ""},
		{"other.test", "/x?%zz&k=" + enc, ""},
		{"allowed.test", "/api/" + enc, ""},
		{"other.test", "/x", tok + ": v\r\n"},
		{"allowed.test", "/api/x", strings.ToUpper(tok) + ": v\r\n"},
	} {
		hostport := fmt.Sprintf("%s:%d", tc.host, port)
		resp, body := interceptedRaw(t, tp, secs, hostport, "GET "+tc.target+" HTTP/1.1\r\nHost: "+hostport+"\r\n"+tc.hdr+"Connection: close\r\n\r\n")
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" || !strings.Contains(body, "secret TOKEN") {
			t.Errorf("%s %s %q: %d %q; want 403 naming secret TOKEN", tc.host, tc.target, tc.hdr, resp.StatusCode, body)
		}
		wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionDeny, "secret placeholder")
	}
	for _, tc := range []struct{ target, hdr string }{
		{"/x/" + enc, ""},
		{"/x?" + enc2, ""},
		{"/x", tok + ": v\r\n"},
	} {
		resp, body := tp.raw(t, fmt.Sprintf("GET http://denied.test:%d%s HTTP/1.1\r\nHost: denied.test:%d\r\n%sConnection: close\r\n\r\n", port, tc.target, port, tc.hdr))
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" || !strings.Contains(body, "secret TOKEN") {
			t.Errorf("plain HTTP %s %q: %d %q; want 403 naming secret TOKEN", tc.target, tc.hdr, resp.StatusCode, body)
		}
		wantEvent(t, tp.nextOf(t, ProtoHTTP), ProtoHTTP, DecisionDeny, "secret placeholder")
	}
	if n := srv.count(); n != 0 {
		t.Fatalf("the server received %d refused requests: %s", n, srv.all())
	}

	hostport := fmt.Sprintf("allowed.test:%d", port)
	resp, body := interceptedRaw(t, tp, secs, hostport, "GET /api/a%20b?q=%41 HTTP/1.1\r\nHost: "+hostport+"\r\nAuthorization: Bearer "+tok+"\r\nConnection: close\r\n\r\n")
	if got := srv.all(); resp.StatusCode != 200 || !strings.Contains(got, "url=/api/a%20b?q=%41") || !strings.Contains(got, "Bearer real-token-1") {
		t.Errorf("the control: %d %q, the server got %q; want the value", resp.StatusCode, body, got)
	}
	wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionAllow, "")
}

// TestSecretPlaceholderMethodRefused: a request whose method is a
// placeholder ("moat-secret-... /x HTTP/1.1", a token net/http accepts)
// went to any host unseen, inside an intercepted tunnel and over plain
// HTTP. It is now refused (403, audited). The control: a request with an
// ordinary method of its own, to the same host, is forwarded.
func TestSecretPlaceholderMethodRefused(t *testing.T) {
	srv := newSeenServer(t, nil)
	tp, secs := secretsProxy(t, testRoots())
	tok := secs.list[0].Placeholder
	hostport := fmt.Sprintf("other.test:%d", srv.port)
	for _, m := range []string{tok, strings.ToUpper(tok)} {
		resp, body := interceptedRaw(t, tp, secs, hostport, m+" /x HTTP/1.1\r\nHost: "+hostport+"\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" || !strings.Contains(body, "secret TOKEN is in the request's method") {
			t.Errorf("the placeholder %q as the method: %d %q; want 403", m, resp.StatusCode, body)
		}
		wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionDeny, "secret placeholder")
	}
	resp, body := tp.raw(t, fmt.Sprintf("%s http://denied.test:%d/x HTTP/1.1\r\nHost: denied.test:%d\r\nConnection: close\r\n\r\n", tok, srv.port, srv.port))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "secret TOKEN in its method") {
		t.Errorf("plain HTTP with the placeholder as the method: %d %q; want 403", resp.StatusCode, body)
	}
	wantEvent(t, tp.nextOf(t, ProtoHTTP), ProtoHTTP, DecisionDeny, "secret placeholder")
	if n := srv.count(); n != 0 {
		t.Fatalf("the server received %d refused requests: %s", n, srv.all())
	}
	resp, body = interceptedRaw(t, tp, secs, hostport, "PURGE /x HTTP/1.1\r\nHost: "+hostport+"\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != 200 || srv.count() != 1 {
		t.Errorf("the control, PURGE: %d %q, the server got %q", resp.StatusCode, body, srv.all())
	}
	wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionAllow, "")
}

// TestSecretExpectContinue: with "Expect: 100-continue" the proxy
// answers 100 itself, so it must decide the request's secrets before
// that: a placeholder going to a host it is not for gets the 403 as the
// first answer, before the body is sent, and the server nothing. The
// control: the same request on the secret's host gets 100 Continue,
// then, once the body is sent, the server's answer, and the server the
// value.
func TestSecretExpectContinue(t *testing.T) {
	srv := newSeenServer(t, nil)
	tp, secs := secretsProxy(t, testRoots())
	tok := secs.list[0].Placeholder
	for _, tc := range []struct {
		host, path string
		first      int
	}{
		{"other.test", "/x", http.StatusForbidden},
		{"allowed.test", "/api/x", http.StatusContinue},
	} {
		hostport := fmt.Sprintf("%s:%d", tc.host, srv.port)
		c, br := interceptedConn(t, tp, secs, hostport)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\n", tc.path, hostport, tok)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != tc.first {
			t.Fatalf("%s: first answer %v %v, want %d", tc.host, resp, err, tc.first)
		}
		if tc.first == http.StatusContinue {
			io.WriteString(c, "hello")
			resp, err = http.ReadResponse(br, nil)
			if got := srv.all(); err != nil || resp.StatusCode != 200 || !strings.Contains(got, "Bearer real-token-1") || !strings.Contains(got, `body="hello"`) {
				t.Errorf("%s: %v %v, the server got %q; want the value and the body", tc.host, resp, err, got)
			}
			wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionAllow, "")
		} else {
			wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionDeny, "secret placeholder")
			if n := srv.count(); n != 0 {
				t.Errorf("%s: the server got %s", tc.host, srv.all())
			}
		}
		c.Close()
	}
}

// TestSecretObsFold: a header continued on an obs-fold line is read by
// net/http as one value, the lines joined with a space, and sent on so:
// a placeholder on the continuation line is seen and decided as in any
// header value (refused to a host it is not for; replaced on its own,
// the control), and one split across the fold is not the placeholder
// at the server either.
func TestSecretObsFold(t *testing.T) {
	srv := newSeenServer(t, nil)
	tp, secs := secretsProxy(t, testRoots())
	tok := secs.list[0].Placeholder
	send := func(host, path, hdr string) (*http.Response, string) {
		hostport := fmt.Sprintf("%s:%d", host, srv.port)
		return interceptedRaw(t, tp, secs, hostport, "GET "+path+" HTTP/1.1\r\nHost: "+hostport+"\r\n"+hdr+"Connection: close\r\n\r\n")
	}
	resp, body := send("other.test", "/x", "X-A: a\r\n "+tok+"\r\n")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" {
		t.Errorf("the placeholder on a continuation line to other.test: %d %q; want 403", resp.StatusCode, body)
	}
	wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionDeny, "secret placeholder")
	if n := srv.count(); n != 0 {
		t.Fatalf("the server got %s", srv.all())
	}
	resp, body = send("other.test", "/x", "X-A: "+tok[:10]+"\r\n "+tok[10:]+"\r\n")
	if got := srv.all(); resp.StatusCode != 200 || strings.Contains(got, tok) || !strings.Contains(got, tok[:10]+" "+tok[10:]) {
		t.Errorf("the placeholder split by a fold: %d %q, the server got %q; want the halves apart", resp.StatusCode, body, got)
	}
	tp.nextOf(t, ProtoIntercepted)
	resp, body = send("allowed.test", "/api/x", "Authorization: Bearer\r\n "+tok+"\r\n")
	if got := srv.all(); resp.StatusCode != 200 || !strings.Contains(got, "Authorization:[Bearer real-token-1]") {
		t.Errorf("the placeholder on a continuation line to its host: %d %q, the server got %q; want the value", resp.StatusCode, body, got)
	}
	wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionAllow, "")
}

// TestSecretTrailerAfterEarlyAnswer: a server may answer before the
// request's body ends; the proxy relays that answer, and trailers that
// arrive afterwards are still decided: a placeholder in them to a host it
// is not for is never sent, and the request's event is a refusal, not
// an allowed request. The control is the answer itself, which the client
// gets whole.
func TestSecretTrailerAfterEarlyAnswer(t *testing.T) {
	port := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		// Else net/http reads the body before answering.
		w.Header().Set("Connection", "close")
		io.WriteString(w, "early")
	})
	tp, secs := secretsProxy(t, testRoots())
	tok := secs.list[0].Placeholder
	hostport := fmt.Sprintf("other.test:%d", port)
	c, br := interceptedConn(t, tp, secs, hostport)
	defer c.Close()
	fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sig\r\nConnection: close\r\n\r\n5\r\nhello\r\n", hostport)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the early answer: %v %v", resp, err)
	}
	if b, err := io.ReadAll(resp.Body); string(b) != "early" {
		t.Fatalf("the early answer's body: %q %v", b, err)
	}
	io.WriteString(c, "0\r\nX-Sig: "+tok+"\r\n\r\n")
	e := tp.nextOf(t, ProtoIntercepted)
	wantEvent(t, e, ProtoIntercepted, DecisionDeny, "secret placeholder")
	contains(t, e.Reason, "X-Sig trailer")
}

// TestSecretPlaceholderInNameRefused: a destination name with a
// placeholder in it, which a wildcard allow entry matches, went out as it
// was: in the DNS query resolving it, and to the server as TLS server
// name or Host. It is now refused before any lookup, in a CONNECT, a
// SOCKS5 CONNECT and a plain-HTTP request alike (the TUN resolver's
// NXDOMAIN is TestTUNRefusesPlaceholderName). The controls: another name
// under the same wildcard is allowed, resolved and connected.
func TestSecretPlaceholderInNameRefused(t *testing.T) {
	port := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {})
	_, secs := secretsProxy(t, testRoots())
	tok := secs.list[0].Placeholder
	bad := tok + ".wild.test"
	tp := newProxy(t, mustRules(t, []string{"*.wild.test"}, nil, loopbackCIDR),
		names(map[string][]string{"ok.wild.test": {"127.0.0.1"}, bad: {"127.0.0.1"}}))
	tp.Secrets = secs

	c, resp := tp.connect(t, fmt.Sprintf("%s:%d", strings.ToUpper(bad), port))
	if c != nil || resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" {
		t.Errorf("CONNECT to a name with the placeholder: %d %v; want 403", resp.StatusCode, resp.Header)
	}
	wantEvent(t, tp.event(t), ProtoConnect, DecisionDeny, "secret placeholder")
	if _, rep := tp.socks(t, socksAtypDomain, []byte(bad), port); rep != 2 {
		t.Errorf("SOCKS5 CONNECT to a name with the placeholder: reply %d, want 2", rep)
	}
	wantEvent(t, tp.event(t), ProtoSOCKS5, DecisionDeny, "secret placeholder")
	resp, body := tp.get(t, fmt.Sprintf("http://%s:%d/", bad, port), fmt.Sprintf("%s:%d", bad, port))
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" {
		t.Errorf("plain HTTP to a name with the placeholder: %d %q; want 403", resp.StatusCode, body)
	}
	wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, "secret placeholder")
	// Spelled with a fullwidth first letter, which IDNA maps to the
	// placeholder's own: the rules and the lookup would see that name.
	fw := "\uff4d" + bad[1:]
	if c, resp := tp.connect(t, fmt.Sprintf("%s:%d", fw, port)); c != nil || resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" {
		t.Errorf("CONNECT to the name with a fullwidth letter: %d %v; want 403", resp.StatusCode, resp.Header)
	}
	wantEvent(t, tp.event(t), ProtoConnect, DecisionDeny, "secret placeholder")
	if _, rep := tp.socks(t, socksAtypDomain, []byte(fw), port); rep != 2 {
		t.Errorf("SOCKS5 CONNECT to the name with a fullwidth letter: reply %d, want 2", rep)
	}
	wantEvent(t, tp.event(t), ProtoSOCKS5, DecisionDeny, "secret placeholder")
	tp.mu.Lock()
	resolved := slices.Clone(tp.resolved)
	tp.mu.Unlock()
	if len(resolved) != 0 || len(tp.dials()) != 0 {
		t.Fatalf("resolved %v, dialed %v; want nothing", resolved, tp.dials())
	}

	c, resp = tp.connect(t, fmt.Sprintf("ok.wild.test:%d", port))
	if c == nil {
		t.Fatalf("the control, CONNECT ok.wild.test: %d", resp.StatusCode)
	}
	c.Close()
	if e := tp.event(t); e.Decision != DecisionAllow {
		t.Errorf("the control: event %+v", e)
	}
	if _, rep := tp.socks(t, socksAtypDomain, []byte("ok.wild.test"), port); rep != 0 {
		t.Errorf("the control, SOCKS5 CONNECT ok.wild.test: reply %d", rep)
	}
}

// TestSecretRepeatedHeader: every value of a repeated header is decided,
// not only the first net/http's Get returns: the placeholder in a
// header's second line is refused to a host it is not for, and, the
// control, replaced on its own host, the other line left as it was.
func TestSecretRepeatedHeader(t *testing.T) {
	srv := newSeenServer(t, nil)
	tp, secs := secretsProxy(t, testRoots())
	tok := secs.list[0].Placeholder
	send := func(host, path string) (*http.Response, string) {
		hostport := fmt.Sprintf("%s:%d", host, srv.port)
		return interceptedRaw(t, tp, secs, hostport, "GET "+path+" HTTP/1.1\r\nHost: "+hostport+"\r\nX-A: first\r\nX-A: "+tok+"\r\nConnection: close\r\n\r\n")
	}
	resp, body := send("other.test", "/x")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "secret TOKEN") {
		t.Errorf("the placeholder in a repeated header's second line to other.test: %d %q; want 403", resp.StatusCode, body)
	}
	wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionDeny, "secret placeholder")
	if n := srv.count(); n != 0 {
		t.Fatalf("the server got %s", srv.all())
	}
	resp, body = send("allowed.test", "/api/x")
	if got := srv.all(); resp.StatusCode != 200 || !strings.Contains(got, "X-A:[first real-token-1]") {
		t.Errorf("the placeholder in a repeated header to its host: %d %q, the server got %q; want it replaced", resp.StatusCode, body, got)
	}
	wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionAllow, "")
}
