//go:build linux

package httpapi_test

import (
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
)

// TestApprovalsPageBehindTLSProxy: the daemon serves plain HTTP and is
// meant to sit behind a TLS proxy, where the browser's Origin is
// https:// at the Host the proxy passes on. The page refused every POST
// there, its login first, as from another site, and its cookie was
// never Secure. A login from the https:// origin now works and gets a
// Secure cookie, and the session's POSTs must come from that origin:
// the page's other scheme and another site are refused (the controls),
// the page's own approve goes through.
func TestApprovalsPageBehindTLSProxy(t *testing.T) {
	d := startDaemon(t, daemon.Config{Approvals: true}, &httpapi.Tokens{})
	d.srv.WebAddr = d.tcp
	// A proxy that ends TLS and passes the browser's Host on, as Caddy
	// and nginx's usual configuration do.
	proxy := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: d.tcp}))
	t.Cleanup(proxy.Close)
	self := proxy.URL // https://127.0.0.1:PORT
	p := &pageClient{t: t, base: self, origin: self, hc: proxy.Client()}

	l, err := d.c.WebLogin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Without WebURL the link names the daemon's own address (the
	// control); with it, the proxy's origin, which the login below uses.
	if want := "http://" + d.tcp + "/approvals#code="; !strings.HasPrefix(l.URL, want) {
		t.Errorf("login link without WebURL: %q, want %s…", l.URL, want)
	}
	d.srv.WebURL = self + "/"
	if l, err = d.c.WebLogin(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := self + "/approvals#code=" + l.Code; l.URL != want {
		t.Errorf("login link with WebURL: %q, want %q", l.URL, want)
	}
	st, body, h := p.do("POST", "/approvals/login", map[string]string{"code": l.Code}, nil)
	if st != 200 {
		t.Fatalf("login through the TLS proxy: %d %v", st, body)
	}
	ck := h.Get("Set-Cookie")
	if !strings.Contains(ck, "Secure") || !strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Strict") {
		t.Errorf("cookie behind TLS: %s", ck)
	}
	p.cookie, _, _ = strings.Cut(ck, ";")
	p.csrf = body["csrf"].(string)
	csrf := map[string]string{"X-Moat-Csrf": p.csrf}

	s := d.create(t, &client.CreateSessionRequest{Policy: shipPolicy})
	res := execAsync(d.c, s.ID, "echo", "ship", "it")
	a := waitApproval(t, d.c, "echo", "ship", "it")
	if st, body, _ := p.do("GET", "/approvals/state", nil, csrf); st != 200 {
		t.Fatalf("state: %d %v", st, body)
	}
	for _, o := range []string{"http://" + strings.TrimPrefix(self, "https://"), "https://evil.example", ""} {
		p.origin = o
		if st, _, _ := p.do("POST", "/approvals/"+a.ID+"/approve", map[string]string{"scope": "once"}, csrf); st != 403 {
			t.Errorf("approve from origin %q: %d", o, st)
		}
	}
	p.origin = self
	if st, body, _ := p.do("POST", "/approvals/"+a.ID+"/approve", map[string]string{"scope": "once"}, csrf); st != 204 {
		t.Fatalf("approve from the page: %d %v", st, body)
	}
	select {
	case r := <-res:
		if r.err != nil || r.out != "ship it\n" {
			t.Fatalf("exec approved by the page: %+v %v", r.rep, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the approved command did not finish")
	}
	st, _, h = p.do("POST", "/approvals/logout", nil, csrf)
	if st != 204 || !strings.Contains(h.Get("Set-Cookie"), "Secure") {
		t.Errorf("logout: %d %s", st, h.Get("Set-Cookie"))
	}
}
