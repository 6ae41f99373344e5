//go:build linux

package httpapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/egress"
)

// TestFetchThroughTheAPI: POST /v1/sessions/{id}/fetch fetches a public
// HTTPS page for a session (a loopback server stands in, its names and
// addresses allowed by the test's fetcher): the page comes back (the
// positive control), a host a rule denies, and one the session's
// [network] does not allow, are refused with "denied" naming why, and a
// redirect and plain HTTP are refused with "fetch_refused".
func TestFetchThroughTheAPI(t *testing.T) {
	port, fetcher := fetchServer(t)
	d := startDaemon(t, daemon.Config{Fetcher: fetcher}, nil)
	s := d.create(t, &client.CreateSessionRequest{Policy: fetchNet + `[[rules]]
name = "no-denied"
match = { host = "denied.test" }
decision = "deny"
reason = "not this one"
`})
	ctx := context.Background()
	r, err := d.c.Fetch(ctx, s.ID, fmt.Sprintf("https://api.test:%d/ok", port))
	if err != nil || r.Status != 200 || r.Body != "hello from the page" {
		t.Fatalf("fetch of the page: %v %+v", err, r)
	}
	for _, tc := range []struct{ url, code, msg string }{
		{fmt.Sprintf("https://denied.test:%d/ok", port), client.CodeDenied, "no-denied"},
		{fmt.Sprintf("https://api.test:%d/redirect", port), client.CodeFetchRefused, "redirect"},
		{fmt.Sprintf("http://api.test:%d/ok", port), client.CodeFetchRefused, "https"},
		// What the session's [network] does not allow is not fetched.
		{fmt.Sprintf("https://other.test:%d/ok", port), client.CodeDenied, `add "other.test" to [network] allow`},
	} {
		_, err := d.c.Fetch(ctx, s.ID, tc.url)
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Code != tc.code || !strings.Contains(ae.Message, tc.msg) {
			t.Errorf("fetch %s: %v, want %s naming %q", tc.url, err, tc.code, tc.msg)
		}
	}
}

// TestFetchSchemeFirst: a URL no policy lets through (not https) is
// refused as such in a session without network too, not with the advice
// to allow the network, which would not help. The control: an https URL
// there gets that advice.
func TestFetchSchemeFirst(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	for url, want := range map[string]string{"http://example.com/": "only https://", "https://example.com/": "mode"} {
		_, err := d.c.Fetch(context.Background(), s.ID, url)
		var ae *client.Error
		if !errors.As(err, &ae) || !strings.Contains(ae.Message, want) {
			t.Errorf("fetch %s in a session without network: %v, want %q", url, err, want)
		}
	}
}

// fetchNet is the [network] of a session whose fetches reach the
// fetchServer's names.
const fetchNet = "[network]\nmode = \"allow\"\nallow = [\"api.test\", \"denied.test\"]\n"

// fetchServer is a loopback HTTPS server standing in for public pages
// (api.test, denied.test; /redirect redirects, every other path answers
// "hello from the page"), and a Fetcher that reaches it.
func fetchServer(t *testing.T) (port int, f *egress.Fetcher) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "api.test"}, DNSNames: []string{"api.test", "denied.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/ok", http.StatusFound)
			return
		}
		if r.URL.Path == "/echo-redirect" {
			// The same server's redirect, and a broken header line,
			// quoting the value: a refusal quotes them.
			w.Header().Set("Location", "https://elsewhere.test/?t="+fetchSecret)
			w.WriteHeader(http.StatusFound)
			return
		}
		if r.URL.Path == "/echo-broken" {
			c, bw, err := w.(http.Hijacker).Hijack()
			if err == nil {
				bw.WriteString("HTTP/1.1 200 OK\r\nbroken-line-" + fetchSecret + "\r\n\r\n")
				bw.Flush()
				c.Close()
			}
			return
		}
		if r.URL.Path == "/echo" {
			// A server that hands out what a request once carried.
			w.Header().Set("X-Last", "Bearer "+fetchSecret)
			w.Header().Set("X-"+fetchSecret, "kept")
			fmt.Fprint(w, "last auth: Bearer "+fetchSecret)
			return
		}
		fmt.Fprint(w, "hello from the page")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	port = srv.Listener.Addr().(*net.TCPAddr).Port
	roots := x509.NewCertPool()
	roots.AddCert(cert)

	return port, &egress.Fetcher{
		AllowCIDRs: []string{"127.0.0.0/8"}, TLS: &tls.Config{RootCAs: roots},
		Resolver: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
	}
}

// TestFetchSpendsTheSessionsBudgets: a fetch made for a session is a
// request to its host: the session's request budget for that host, and
// its network budget, count it as they count its commands' requests, and
// refuse the fetch past them (fetch_refused, naming the budget). The
// positive controls: the fetches within each budget, and a session with
// no budget fetching as often.
func TestFetchSpendsTheSessionsBudgets(t *testing.T) {
	port, fetcher := fetchServer(t)
	d := startDaemon(t, daemon.Config{Fetcher: fetcher}, nil)
	url := fmt.Sprintf("https://api.test:%d/ok", port)
	for _, tc := range []struct {
		name, policy string
		ok           int    // fetches that pass
		budget       string // named by the refusal of the next
	}{
		{"requests", `[budgets]
requests = { "api.test" = 2 }
`, 2, "requests[api.test]"},
		// One page is more than the budget: the next fetch is refused.
		{"network", "[budgets]\nnetwork = 10\n", 1, "network"},
		{"none", "", 4, ""},
	} {
		s := d.create(t, &client.CreateSessionRequest{Policy: fetchNet + tc.policy})
		for i := range tc.ok {
			if r, err := d.c.Fetch(context.Background(), s.ID, url); err != nil || r.Status != 200 {
				t.Fatalf("%s: fetch %d: %v %+v", tc.name, i+1, err, r)
			}
		}
		if tc.budget == "" {
			continue
		}
		for _, u := range []string{url, fmt.Sprintf("https://API.test.:%d/ok", port)} {
			_, err := d.c.Fetch(context.Background(), s.ID, u)
			var ae *client.Error
			if !errors.As(err, &ae) || ae.Code != client.CodeFetchRefused || !strings.Contains(ae.Message, tc.budget) {
				t.Errorf("%s: fetch of %s past the budget: %v, want %s naming %q", tc.name, u, err, client.CodeFetchRefused, tc.budget)
			}
		}
	}
}

// fetchSecret is the value of TestFetchScrubsSecrets's secret, which its
// fetchServer's /echo hands out.
const fetchSecret = "REALVALUE-fetch-7f3a9c"

// TestFetchScrubsSecrets: a page a session fetches carries none of its
// secrets' values (a server its commands sent one to echoes it): each
// becomes its placeholder, in the headers and the body, as the proxy's
// responses do. Before, the fetch handed the agent the real value
// (tried). The control: a session without the secret gets the page as
// served.
func TestFetchScrubsSecrets(t *testing.T) {
	port, fetcher := fetchServer(t)
	t.Setenv("MOAT_TEST_FETCH_SECRET", fetchSecret)
	d := startDaemon(t, daemon.Config{Fetcher: fetcher}, nil)
	url := fmt.Sprintf("https://api.test:%d/echo", port)
	plain := d.create(t, &client.CreateSessionRequest{Policy: fetchNet})
	if r, err := d.c.Fetch(context.Background(), plain.ID, url); err != nil || !strings.Contains(r.Body, fetchSecret) {
		t.Fatalf("control: %v %+v", err, r)
	}
	s := d.create(t, &client.CreateSessionRequest{Policy: fetchNet + "[[secrets]]\nname = \"T\"\nsource = \"env:MOAT_TEST_FETCH_SECRET\"\nhosts = [\"api.test\"]\n"})
	r, err := d.c.Fetch(context.Background(), s.ID, url)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.Body, fetchSecret) || strings.Contains(fmt.Sprint(r.Headers), fetchSecret) {
		t.Errorf("the fetch handed out the secret: %+v", r)
	}
	if !strings.Contains(r.Body, "last auth: Bearer moat-") {
		t.Errorf("the value is not replaced by its placeholder: %q", r.Body)
	}
	// A refusal quotes what the server sent: a redirect's Location, a
	// broken header line. Each handed out the value (found by a tester);
	// the control: the session without the secret is told it.
	for _, p := range []string{"/echo-redirect", "/echo-broken"} {
		u := fmt.Sprintf("https://api.test:%d%s", port, p)
		_, perr := d.c.Fetch(context.Background(), plain.ID, u)
		if perr == nil || !strings.Contains(perr.Error(), fetchSecret) {
			t.Errorf("control: %s: %v, want a refusal quoting the server", p, perr)
		}
		_, serr := d.c.Fetch(context.Background(), s.ID, u)
		if serr == nil || strings.Contains(serr.Error(), fetchSecret) || !strings.Contains(serr.Error(), egress.PlaceholderPrefix) {
			t.Errorf("%s: %v, want the refusal with the placeholder", p, serr)
		}
	}
	// A header whose name carried the value keeps its own value (it was
	// "", found by a tester).
	named := false
	for k, v := range r.Headers {
		if strings.HasPrefix(k, "x-moat-") && v == "kept" {
			named = true
		}
	}
	if !named {
		t.Errorf("the header named by the value lost its value: %v", r.Headers)
	}
}

// TestFetchRefusesPlaceholders: a fetch never adds a secret, so a URL
// that carries a session's placeholder (in the path, the query, percent-
// encoded, in the host name) would send it as it is, to any host the
// session may fetch: each is refused (denied, naming the secret) and
// audited, as the proxy refuses its commands' requests that carry one.
// Before, the fetch went out (tried). The control: the same URLs
// without the placeholder are fetched.
func TestFetchRefusesPlaceholders(t *testing.T) {
	port, fetcher := fetchServer(t)
	t.Setenv("MOAT_TEST_FETCH_SECRET", fetchSecret)
	d := startDaemon(t, daemon.Config{Fetcher: fetcher}, nil)
	s := d.create(t, &client.CreateSessionRequest{Policy: fetchNet + "[[secrets]]\nname = \"T\"\nsource = \"env:MOAT_TEST_FETCH_SECRET\"\nhosts = [\"api.test\"]\n"})
	out, _, _ := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "printf %s \"$T\""}})
	if !strings.HasPrefix(out, egress.PlaceholderPrefix) {
		t.Fatalf("the session's $T is %q, not a placeholder", out)
	}
	ph := out
	for _, u := range []string{
		fmt.Sprintf("https://denied.test:%d/ok?k=%s", port, ph),
		fmt.Sprintf("https://api.test:%d/%s", port, ph),
		fmt.Sprintf("https://api.test:%d/ok?k=%s", port, strings.ReplaceAll(ph, "-", "%2D")),
		fmt.Sprintf("https://%s.api.test:%d/ok", ph, port),
	} {
		_, err := d.c.Fetch(context.Background(), s.ID, u)
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Code != client.CodeDenied || !strings.Contains(ae.Message, "placeholder of secret T") {
			t.Errorf("fetch of %s: %v, want %s naming the secret", u, err, client.CodeDenied)
		}
		if ae != nil && strings.Contains(ae.Message, fetchSecret) {
			t.Errorf("the refusal shows the value: %s", ae.Message)
		}
		ok := strings.ReplaceAll(strings.ReplaceAll(u, ph+".", ""), strings.ReplaceAll(ph, "-", "%2D"), "x")
		ok = strings.ReplaceAll(strings.ReplaceAll(ok, ph, "ok"), "denied.test", "api.test")
		if r, err := d.c.Fetch(context.Background(), s.ID, ok); err != nil {
			t.Errorf("control: fetch of %s: %v %+v", ok, err, r)
		}
	}
	var denied int
	d.c.Events(context.Background(), s.ID, 0, false, func(ev *client.AuditEvent) error {
		if strings.Contains(string(ev.Record), `"rule":"secret placeholder"`) && strings.Contains(string(ev.Record), `"at":"fetch"`) {
			denied++
		}
		return nil
	})
	if denied != 4 {
		t.Errorf("%d refusals in the session's events, want 4", denied)
	}
}

// TestBadEventsCursorNamed: a bad Last-Event-ID header is named as the
// header (it was called a bad "after" parameter, which the request did
// not have); a bad after is named as after. A symlink loop in the files
// API is called a loop, not a way out of the workspace.
func TestBadEventsCursorNamed(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ws := t.TempDir()
	s := d.create(t, &client.CreateSessionRequest{Workspace: ws})
	hc := rawClient(d.sock)
	base := "http://moat/v1/sessions/" + s.ID
	if code, e := apiErr(t, hc, "GET", base+"/events", "", map[string]string{"Last-Event-ID": "zz"}); code != 400 || !strings.Contains(e.Message, `the Last-Event-ID header: "zz" is not a sequence number`) {
		t.Errorf("a bad Last-Event-ID: %d %+v", code, e)
	}
	if code, e := apiErr(t, hc, "GET", base+"/events?after=x", "", nil); code != 400 || !strings.Contains(e.Message, `after: "x" is not a sequence number`) {
		t.Errorf("a bad after: %d %+v", code, e)
	}
	os.Symlink("loop2", filepath.Join(ws, "loop1"))
	os.Symlink("loop1", filepath.Join(ws, "loop2"))
	os.Symlink("/etc/passwd", filepath.Join(ws, "out"))
	if code, e := apiErr(t, hc, "GET", base+"/files?path=loop1", "", nil); code/100 != 4 || !strings.Contains(e.Message, "loop of symbolic links") {
		t.Errorf("a link loop: %d %+v", code, e)
	}
	if code, e := apiErr(t, hc, "GET", base+"/files?path=out", "", nil); code/100 != 4 || !strings.Contains(e.Message, "leads out of the workspace") {
		t.Errorf("control: a link out: %d %+v", code, e)
	}
}

// TestDurationTooLong: a ttl past Go's longest duration is refused
// saying it is too long, not that it is no duration; one that is not a
// duration says so (the control).
func TestDurationTooLong(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	hc := rawClient(d.sock)
	for ttl, want := range map[string]string{"999999999h": "too long", "abc": `ttl: "abc" is not a duration such as "30m"`, "1ns": "ttl 1ns is under a second"} {
		if code, e := apiErr(t, hc, "POST", "http://moat/v1/sessions", `{"ttl":"`+ttl+`"}`, nil); code != 400 || !strings.Contains(e.Message, want) {
			t.Errorf("ttl %s: %d %+v, want 400 and %q", ttl, code, e, want)
		}
	}
}
