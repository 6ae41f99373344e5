package mcpserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/moatbox/moat/egress"
)

// TestFetch: the fetch tool reads a public HTTPS page the session's
// [network] allows (the positive control: a loopback server standing in
// for one, reached through the fetcher's test hooks), and refuses plain
// HTTP, a host the policy's rules deny, a host [network] does not allow,
// and what is not a URL, as error results.
func TestFetch(t *testing.T) {
	port, f := docsServer(t)
	pol := "[network]\nmode = \"allow\"\nallow = [\"docs.test\", \"blocked.test\"]\n" +
		"[[rules]]\nname = \"no-blocked\"\nmatch = { host = \"blocked.test\" }\ndecision = \"deny\"\nreason = \"not that site\"\n"
	e := start(t, setup{policy: pol, fetcher: f})
	e.ok(t, "fetch", map[string]any{"url": fmt.Sprintf("https://docs.test:%d/guide", port)}, "HTTP 200", "the page at /guide")
	e.fails(t, "fetch", map[string]any{"url": fmt.Sprintf("http://docs.test:%d/guide", port)}, "https")
	e.fails(t, "fetch", map[string]any{"url": fmt.Sprintf("https://blocked.test:%d/", port)}, "rule no-blocked", "not that site")
	e.fails(t, "fetch", map[string]any{"url": fmt.Sprintf("https://other.test:%d/", port)}, "fetch refused", "not in the allow list", `add "other.test" to [network] allow`)
	e.fails(t, "fetch", map[string]any{"url": "not a url"}, "not a URL")
	// The rules decide the host the fetcher connects to, however the URL
	// spells it: a trailing dot, upper case, full-width letters.
	e.ok(t, "fetch", map[string]any{"url": fmt.Sprintf("https://docs.test.:%d/dot", port)}, "HTTP 200", "the page at /dot")
	for _, h := range []string{"blocked.test.", "BLOCKED.test.", "\uff42locked.test"} {
		e.fails(t, "fetch", map[string]any{"url": fmt.Sprintf("https://%s:%d/", h, port)}, "rule no-blocked")
	}
}

// TestFetchNoNetwork: a session with no network fetches nothing, under
// the default policy or one that says so, with a sentence saying how to
// allow it; a session on the host's network fetches (the control).
func TestFetchNoNetwork(t *testing.T) {
	port, f := docsServer(t)
	url := fmt.Sprintf("https://docs.test:%d/guide", port)
	for name, pol := range map[string]string{"default": "", "none": "[network]\nmode = \"none\"\n"} {
		t.Run(name, func(t *testing.T) {
			e := start(t, setup{policy: pol, fetcher: f})
			e.fails(t, "fetch", map[string]any{"url": url}, "fetch refused", "the session has no network", `mode = "allow"`)
		})
	}
	t.Run("host", func(t *testing.T) {
		e := start(t, setup{policy: "[network]\nmode = \"host\"\n", fetcher: f})
		e.ok(t, "fetch", map[string]any{"url": url}, "HTTP 200", "the page at /guide")
	})
}

// docsServer is a loopback HTTPS server standing in for public pages
// (docs.test, blocked.test: "the page at PATH"), and a Fetcher that
// reaches it.
func docsServer(t *testing.T) (port int, f *egress.Fetcher) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "docs.test"},
		DNSNames: []string{"docs.test", "blocked.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "the page at %s", r.URL.Path)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	port = srv.Listener.Addr().(*net.TCPAddr).Port
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return port, &egress.Fetcher{
		AllowCIDRs: []string{"127.0.0.0/8"},
		Resolver: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		TLS: &tls.Config{RootCAs: roots},
	}
}

// TestFetchSpendsBudgets: a fetch is a request of the session's to its
// host: the session's request budget for that host counts it, and
// refuses it past the budget, however the URL spells the host. The
// positive controls: the fetch within the budget, and another host.
func TestFetchSpendsBudgets(t *testing.T) {
	port, f := docsServer(t)
	e := start(t, setup{policy: "[network]\nmode = \"allow\"\nallow = [\"docs.test\", \"blocked.test\"]\n[budgets]\nrequests = { \"docs.test\" = 1 }\n", fetcher: f})
	e.ok(t, "fetch", map[string]any{"url": fmt.Sprintf("https://docs.test:%d/one", port)}, "HTTP 200", "the page at /one")
	for _, h := range []string{"docs.test", "DOCS.test."} {
		e.fails(t, "fetch", map[string]any{"url": fmt.Sprintf("https://%s:%d/two", h, port)}, "requests[docs.test] budget")
	}
	e.ok(t, "fetch", map[string]any{"url": fmt.Sprintf("https://blocked.test:%d/other", port)}, "HTTP 200", "the page at /other")
}
