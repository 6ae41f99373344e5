package egress

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func basicAuth(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// TestSecretBasicCredentials: a placeholder in the Basic credentials of
// the Authorization header (curl -u, git, a URL's user information) is
// replaced by the value on a request the secret is for, however the
// scheme is spelled and with or without base64's padding; the
// credentials echoed back in the body, headers and trailers come back as
// the command sent them (encoded, with the placeholder). The positive
// control is what the server received: the value.
func TestSecretBasicCredentials(t *testing.T) {
	var sent echoLog
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.Header().Set("X-Echo", auth)
		w.Header().Set("Trailer", "X-Echo-Trailer")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, sent.add("auth="+auth))
		w.Header().Set("X-Echo-Trailer", auth)
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	s.StartTLS()
	defer s.Close()
	port := s.Listener.Addr().(*net.TCPAddr).Port
	tp, secs := secretsProxy(t, testRoots())
	c := moatClient(tp, secs)
	tok := secs.list[0].Placeholder
	u := fmt.Sprintf("https://allowed.test:%d/api/repo.git/info/refs", port)

	for _, tc := range []struct{ user, header string }{
		{"x-access-token", basicAuth("x-access-token", tok)},
		{"u", basicAuth("u", tok)}, // padded
		{"u", "basic " + strings.TrimRight(base64.StdEncoding.EncodeToString([]byte("u:"+tok)), "=")},
		{"u", "BASIC  " + base64.URLEncoding.EncodeToString([]byte("u:"+tok))},
	} {
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", tc.header)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%q: %v", tc.header, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		atServer, toClient := basicAuth(tc.user, "real-token-1"), basicAuth(tc.user, tok)
		if resp.StatusCode != 200 || sent.last() != "auth="+atServer || string(b) != "auth="+toClient {
			t.Fatalf("%q: %d %q, the server got %q; want %q at the server", tc.header, resp.StatusCode, b, sent.last(), atServer)
		}
		if e, tr := resp.Header.Get("X-Echo"), resp.Trailer.Get("X-Echo-Trailer"); e != toClient || tr != toClient {
			t.Errorf("%q: echoed header %q, trailer %q; want %q", tc.header, e, tr, toClient)
		}
		e := tp.nextOf(t, ProtoIntercepted)
		if e.Decision != DecisionAllow || len(e.Secrets) != 1 || e.Secrets[0] != "TOKEN" {
			t.Errorf("%q: event %+v, want allowed with secret TOKEN", tc.header, e)
		}
	}
	// The same credentials were sent twice or more: each distinct one is
	// one pattern more.
	if n := len(secs.pats.Load().vals); n != 2+2 {
		t.Errorf("%d patterns, want the 2 values and 2 Basic credentials", n)
	}
}

// TestSecretBasicRefused: the placeholder in Basic credentials is refused
// (403, audited, the server gets nothing) where a placeholder in a header
// is: to a host the secret is not for, outside its paths, over plain
// HTTP, and, for a secret with a header template, anywhere but that
// header. The controls: Basic credentials without a placeholder, and
// ones that are not base64 at all, go through unchanged.
func TestSecretBasicRefused(t *testing.T) {
	srv, port := secretServer(t)
	tp, secs := secretsProxy(t, testRoots())
	c := moatClient(tp, secs)
	tok, key := secs.list[0].Placeholder, secs.list[1].Placeholder
	served := func() int {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.sent)
	}

	for _, tc := range []struct{ url, auth, name string }{
		{fmt.Sprintf("https://other.test:%d/x", port), basicAuth("x-access-token", tok), "secret TOKEN"},
		{fmt.Sprintf("https://allowed.test:%d/elsewhere", port), basicAuth("x-access-token", tok), "secret TOKEN"},
		{fmt.Sprintf("https://other.test:%d/x", port), basicAuth("user", key), "secret KEY"},
		{fmt.Sprintf("https://other.test:%d/x", port), basicAuth(key, ""), "secret KEY"},
	} {
		before := served()
		code, body, err := fetch(t, c, "GET", tc.url, map[string]string{"Authorization": tc.auth})
		if err != nil || code != http.StatusForbidden || !strings.Contains(body, tc.name) || !strings.Contains(body, "Authorization header's Basic credentials") ||
			strings.Contains(body, "real-") {
			t.Errorf("GET %s with %q: %d %q %v; want 403 naming %s in the Basic credentials", tc.url, tc.auth, code, body, err, tc.name)
		}
		e := tp.nextOf(t, ProtoIntercepted)
		wantEvent(t, e, ProtoIntercepted, DecisionDeny, "secret placeholder")
		contains(t, e.Reason, "Basic credentials")
		if served() != before {
			t.Errorf("GET %s with %q: the server got the request", tc.url, tc.auth)
		}
	}

	// Plain HTTP: refused before any dial.
	resp, body := tp.raw(t, fmt.Sprintf("GET http://denied.test:%d/ HTTP/1.1\r\nHost: denied.test:%d\r\nAuthorization: %s\r\nConnection: close\r\n\r\n",
		port, port, basicAuth("x-access-token", tok)))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "secret TOKEN in the Authorization header's Basic credentials") {
		t.Errorf("plain HTTP with the placeholder in Basic credentials: %d %q; want 403", resp.StatusCode, body)
	}
	wantEvent(t, tp.nextOf(t, ProtoHTTP), ProtoHTTP, DecisionDeny, "secret placeholder")

	// The controls: no placeholder, or no base64, and the credentials
	// reach the server as they were sent.
	for _, tc := range []struct{ url, auth, want string }{
		{fmt.Sprintf("https://other.test:%d/x", port), basicAuth("x-access-token", "ghp_own"), `auth="` + basicAuth("x-access-token", "ghp_own") + `" key="real-key-2" path=/x`},
		{fmt.Sprintf("https://other.test:%d/x", port), "Basic %%not base64" + tok[:4], `auth="Basic %%not base64moat" key="real-key-2" path=/x`},
		{fmt.Sprintf("https://allowed.test:%d/api/x", port), "Basic !!" + basicAuth("u", tok)[6:], `auth="Basic !!` + basicAuth("u", tok)[6:] + `" key="" path=/api/x`},
	} {
		code, body, err := fetch(t, c, "GET", tc.url, map[string]string{"Authorization": tc.auth})
		if err != nil || code != 200 || srv.last() != tc.want {
			t.Errorf("GET %s with %q: %d %q %v, the server got %q; want %q", tc.url, tc.auth, code, body, err, srv.last(), tc.want)
		}
		tp.nextOf(t, ProtoIntercepted)
	}
}

// TestSecretBasicBounded: a run sends at most maxBasic distinct Basic
// credentials with secrets in them (each is scrubbed from every response
// from then on); a request with new ones past that is refused, not sent
// unscrubbed, while those already sent still go (the control), as do
// credentials longer than none.
func TestSecretBasicBounded(t *testing.T) {
	srv, port := secretServer(t)
	tp, secs := secretsProxy(t, testRoots())
	secs.maxBasic = 3
	c := moatClient(tp, secs)
	tok := secs.list[0].Placeholder
	u := fmt.Sprintf("https://allowed.test:%d/api/x", port)
	get := func(user string) (int, string) {
		t.Helper()
		code, body, err := fetch(t, c, "GET", u, map[string]string{"Authorization": basicAuth(user, tok)})
		if err != nil {
			t.Fatal(err)
		}
		tp.nextOf(t, ProtoIntercepted)
		return code, body
	}
	for _, user := range []string{"a", "b", "c", "a"} {
		if code, body := get(user); code != 200 || srv.last() != `auth="`+basicAuth(user, "real-token-1")+`" key="" path=/api/x` {
			t.Fatalf("user %s: %d %q, the server got %q", user, code, body, srv.last())
		}
	}
	if code, body := get("d"); code != http.StatusForbidden || !strings.Contains(body, "secret basic credentials") || strings.Contains(srv.last(), basicAuth("d", "real-token-1")) {
		t.Errorf("a fourth user: %d %q; want 403", code, body)
	}
	if code, _ := get("b"); code != 200 {
		t.Errorf("user b again: %d, want 200", code)
	}
	long := strings.Repeat("x", maxBasicLen)
	if code, body := get(long); code != http.StatusForbidden || !strings.Contains(body, "bytes long") {
		t.Errorf("long credentials: %d %q; want 403", code, body)
	}
}

// hookReader calls f once, before the read after at bytes.
type hookReader struct {
	r  io.Reader
	n  int
	at int
	f  func()
}

func (h *hookReader) Read(p []byte) (int, error) {
	if h.f != nil && h.n >= h.at {
		h.f()
		h.f = nil
	}
	n, err := h.r.Read(p)
	h.n += n
	return n, err
}

// TestBodyScrubberTakesUpBasic: Basic credentials sent while a body is
// being read are scrubbed from it wherever the scrubber has not handed
// the bytes out yet: from the bytes it had read and held back, and in all
// it reads after, however the reads split them. They are added either
// between two reads of the client (the scrubber knows more than it has
// handed out) or while the scrubber reads the body (it has handed out all
// it knows). The control: scrubRef, with the final patterns, on the same
// body.
func TestBodyScrubberTakesUpBasic(t *testing.T) {
	// A value as long as its placeholder: what is handed out is where
	// the body is.
	value := "secret-value-" + strings.Repeat("x", len(NewPlaceholder("S0"))-len("secret-value-"))
	cred := base64.StdEncoding.EncodeToString([]byte("user:" + value))
	checked := 0
	for _, client := range []bool{false, true} {
		for _, at := range []int{0, 1, 5, 40, 90} {
			for off := max(0, at-len(cred)); off <= at+len(cred); off++ {
				for _, prefix := range []string{"", value, value + "...."} {
					for _, size := range []int{1, 3, 64} {
						secs := scrubSecrets(t, value)
						ph := secs.list[0].Placeholder
						body := append(bytes.Repeat([]byte{'.'}, off), prefix+cred+" and "+value...)
						out := -1 // bytes handed out when the credentials were added
						src := &pieces{data: body, sizes: []int{size}, end: io.EOF}
						outer := &hookReader{at: 1 << 30}
						add := func() {
							out = outer.n
							if _, rule, reason := secs.basicForm("user:"+value, "user:"+ph, "Authorization"); rule != "" {
								t.Fatal(reason)
							}
						}
						var b *bodyScrubber
						if client {
							b = secs.newBodyScrubber(src, io.NopCloser(nil))
							outer.at, outer.f = at, add
						} else {
							b = secs.newBodyScrubber(&hookReader{r: src, at: at, f: add}, io.NopCloser(nil))
						}
						outer.r = b
						got, err := readAllSmall(outer, 1)
						b.Close()
						if out < 0 || off+len(prefix) < out {
							continue // the credentials' start was handed out
						}
						checked++
						pats := secs.pats.Load()
						if want := scrubRef(body, pats.vals, pats.phs); err != nil || !bytes.Equal(got, want) || len(pats.vals) != 2 {
							t.Fatalf("client=%v: credentials at %d, added after %d bytes handed out, read %d at a time: %q %v, want %q",
								client, off+len(prefix), out, size, got, err, want)
						}
					}
				}
			}
		}
	}
	if checked < 1000 {
		t.Errorf("%d cases checked", checked)
	}
}

// TestSecretBasicGit: git, given the placeholder as the password in the
// URL of a private repository, authenticates over smart HTTP through the
// proxy (its first request gets 401, the second carries the Basic
// credentials): the server gets the value, and git lists the refs. The
// control that the server does check: without the proxy's help, the
// placeholder is turned away.
func TestSecretBasicGit(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	const sha = "0123456789abcdef0123456789abcdef01234567"
	want := basicAuth("x-access-token", "real-token-1")
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/private.git/info/refs" || r.URL.Query().Get("service") != "git-upload-pack" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "auth="+r.Header.Get("Authorization"), http.StatusUnauthorized)
			return
		}
		pkt := func(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		io.WriteString(w, pkt("# service=git-upload-pack\n")+"0000"+
			pkt(sha+" HEAD\x00symref=HEAD:refs/heads/main\n")+pkt(sha+" refs/heads/main\n")+"0000")
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	s.StartTLS()
	defer s.Close()
	port := s.Listener.Addr().(*net.TCPAddr).Port
	tp, secs := secretsProxy(t, testRoots())
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, secs.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	tok := secs.list[0].Placeholder
	lsRemote := func(proxy string) (string, error) {
		cmd := exec.Command(gitPath, "-c", "http.proxy="+proxy, "-c", "http.sslCAInfo="+ca, "-c", "credential.helper=",
			"ls-remote", fmt.Sprintf("https://x-access-token:%s@allowed.test:%d/api/private.git", tok, port))
		cmd.Env = []string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := lsRemote("http://" + tp.addr)
	if err != nil || !strings.Contains(out, sha+"\tHEAD") || !strings.Contains(out, sha+"\trefs/heads/main") {
		t.Fatalf("git ls-remote through the proxy: %v\n%s", err, out)
	}
	var withSecret int
	for len(tp.events) > 0 {
		if e := <-tp.events; e.Proto == ProtoIntercepted && e.Decision == DecisionAllow && len(e.Secrets) == 1 && e.Secrets[0] == "TOKEN" {
			withSecret++
		}
	}
	if withSecret != 1 {
		t.Errorf("%d intercepted requests with secret TOKEN, want 1", withSecret)
	}

	// The control that git got the refs by the value: the server turns
	// the placeholder away.
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/api/private.git/info/refs?service=git-upload-pack", port), nil)
	req.SetBasicAuth("x-access-token", tok)
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: testRoots(), ServerName: "allowed.test"}}}).Do(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the placeholder straight to the server: %v %v, want 401", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
}
