//go:build linux

package httpapi_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/cookiejar"
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
