//go:build linux

package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
)

// TestApprovalsPageCookieOtherPort: a cookie is not bound to a port
// (RFC 6265, which browsers and Go's cookiejar follow), so the browser
// sends the page's cookie to any server on the same host whose path
// begins with /approvals: another local user's server on
// 127.0.0.1:OTHER gets it from a same-origin fetch of its own page. That
// cookie alone must not let its holder read the CSRF token or answer the
// tenant's approvals; the page itself (which holds the token) still can.
func TestApprovalsPageCookieOtherPort(t *testing.T) {
	d := startDaemon(t, daemon.Config{Approvals: true, ApprovalTimeout: 30 * time.Second}, &httpapi.Tokens{})
	d.srv.WebAddr = d.tcp
	self := "http://" + d.tcp

	// The hostile server: same host, another port.
	var mu sync.Mutex
	var stolen string
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostile := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie("moat_approvals"); err == nil {
			mu.Lock()
			stolen = c.Value
			mu.Unlock()
		}
	})}
	go hostile.Serve(hl)
	defer hostile.Close()

	// The browser: logs in on the page, then visits the hostile server.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	l, err := d.c.WebLogin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", self+"/approvals/login", strings.NewReader(`{"code":"`+l.Code+`"}`))
	req.Header.Set("Origin", self)
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var login map[string]string
	json.NewDecoder(resp.Body).Decode(&login)
	resp.Body.Close()
	if resp.StatusCode != 200 || login["csrf"] == "" {
		t.Fatalf("login: %d %v", resp.StatusCode, login)
	}
	resp, err = browser.Get("http://" + hl.Addr().String() + "/approvals/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	cookie := stolen
	mu.Unlock()
	if cookie == "" {
		t.Fatal("the browser model did not send the cookie to another port: the test proves nothing")
	}

	s := d.create(t, &client.CreateSessionRequest{Policy: shipPolicy})
	res := execAsync(d.c, s.ID, "echo", "ship")
	a := waitApproval(t, d.c, "echo", "ship")

	// The thief, with the cookie alone (and the right Host and Origin,
	// which a non-browser client sets as it likes).
	thief := &pageClient{t: t, base: self, cookie: "moat_approvals=" + cookie}
	st, body, _ := thief.do("GET", "/approvals/state", nil, nil)
	if st == 200 {
		t.Errorf("the page's state with a cookie caught on another port: %d (csrf %v)", st, body["csrf"])
	}
	if tok, _ := body["csrf"].(string); tok != "" {
		thief.origin = self
		if st, _, _ := thief.do("POST", "/approvals/"+a.ID+"/approve", map[string]string{"scope": "once"}, map[string]string{"X-Moat-Csrf": tok}); st == 204 {
			t.Errorf("an approval answered with a cookie caught on another port")
		}
	}

	// Positive control: the page, which holds its CSRF token, reads the
	// state and answers.
	page := &pageClient{t: t, base: self, origin: self, cookie: "moat_approvals=" + cookie, csrf: login["csrf"]}
	hdr := map[string]string{"X-Moat-Csrf": page.csrf}
	page.origin = ""
	if st, body, _ := page.do("GET", "/approvals/state", nil, hdr); st != 200 {
		t.Fatalf("state from the page: %d %v", st, body)
	}
	page.origin = self
	if st, body, _ := page.do("POST", "/approvals/"+a.ID+"/deny", map[string]string{}, hdr); st != 204 {
		t.Fatalf("deny from the page: %d %v", st, body)
	}
	if r := <-res; r.err == nil && r.rep != nil && r.rep.ExitCode == 0 {
		t.Errorf("the command ran: the thief's approval went through (%+v)", r.rep)
	}
}

// TestApprovalsPageCookieTossed: another server on the daemon's host
// (another local user's, on 127.0.0.1:OTHER) may set a cookie of the
// page's name, bound to no port, with a longer path, which the browser
// sends before the page's own. With it, the page was logged out at every
// request, and again after every login: its approvals could not be
// answered. The page's own cookie, the one whose CSRF token the page
// sends, is now the one taken. The controls: the tossed cookie, a valid
// session of the thrower's, does not open the page with the page's token,
// nor the page's cookie without it.
func TestApprovalsPageCookieTossed(t *testing.T) {
	d := startDaemon(t, daemon.Config{Approvals: true, ApprovalTimeout: 30 * time.Second}, &httpapi.Tokens{})
	d.srv.WebAddr = d.tcp
	self := "http://" + d.tcp
	login := func(c *http.Client) string {
		t.Helper()
		l, err := d.c.WebLogin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", self+"/approvals/login", strings.NewReader(`{"code":"`+l.Code+`"}`))
		req.Header.Set("Origin", self)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]string
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != 200 || out["csrf"] == "" {
			t.Fatalf("login: %d %v", resp.StatusCode, out)
		}
		return out["csrf"]
	}
	// The thrower's own valid page session, whose cookie it tosses.
	tjar, _ := cookiejar.New(nil)
	login(&http.Client{Jar: tjar})
	u, _ := url.Parse(self + "/approvals")
	tossed := tjar.Cookies(u)[0].Value

	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostile := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "moat_approvals", Value: tossed, Path: "/approvals/"})
	})}
	go hostile.Serve(hl)
	defer hostile.Close()

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	csrf := login(browser)
	resp, err := browser.Get("http://" + hl.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cs := jar.Cookies(&url.URL{Scheme: "http", Host: d.tcp, Path: "/approvals/state"}); len(cs) != 2 || cs[0].Value != tossed {
		t.Fatalf("the browser model does not send the tossed cookie first (%d cookies): the test proves nothing", len(cs))
	}

	s := d.create(t, &client.CreateSessionRequest{Policy: shipPolicy})
	res := execAsync(d.c, s.ID, "echo", "ship")
	a := waitApproval(t, d.c, "echo", "ship")
	do := func(method, path, csrf string, c *http.Client, cookie string) int {
		t.Helper()
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader(`{}`)
		}
		req, _ := http.NewRequest(method, self+path, body)
		req.Header.Set("X-Moat-Csrf", csrf)
		if method == "POST" {
			req.Header.Set("Origin", self)
		}
		if cookie != "" {
			req.Header.Set("Cookie", "moat_approvals="+cookie)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := do("GET", "/approvals/state", csrf, http.DefaultClient, tossed); st != 401 {
		t.Errorf("the tossed cookie alone with the page's token: %d", st)
	}
	if st := do("GET", "/approvals/state", "", browser, ""); st != 401 {
		t.Errorf("the page's cookies without its token: %d", st)
	}
	if st := do("GET", "/approvals/state", csrf, browser, ""); st != 200 {
		t.Fatalf("the page's state with a cookie tossed in: %d", st)
	}
	if st := do("POST", "/approvals/"+a.ID+"/deny", csrf, browser, ""); st != 204 {
		t.Fatalf("deny from the page with a cookie tossed in: %d", st)
	}
	if r := <-res; r.err == nil && r.rep != nil && r.rep.ExitCode == 0 {
		t.Errorf("the denied command ran (%+v)", r.rep)
	}
}
