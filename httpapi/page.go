package httpapi

import (
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// The approvals page: GET /approvals, a page and a small script (embedded,
// nothing from elsewhere) that list what waits for a person, with approve
// and deny buttons, refreshed every second.
//
// A browser cannot present the API's credentials (a unix socket's peer,
// a bearer token in a header), and any page it has open could send it
// requests, so the page has a way in of its own (docs/security.md):
//
//   - Login: a tenant asks the API for a login link (POST
//     /v1/approvals/web-login; `moat approvals --web`), whose code, in the
//     URL's fragment (never sent to a server, never in a log), works once
//     and for a few minutes. The script posts it to /approvals/login, and
//     gets a cookie (HttpOnly, SameSite=Strict, Path=/approvals, and
//     Secure when the page is https://, behind a TLS proxy) naming a web
//     session of that tenant. A TCP tenant may post its bearer token
//     there instead.
//   - Requests: the web session's cookie, only at the Host it was made
//     for (a name rebound to the daemon's address is another site); every
//     request must carry the session's CSRF token in a header (which a
//     cross-site form cannot set, and which the page keeps in its own
//     origin's sessionStorage: the cookie, bound to no port, reaches any
//     server on the host) and every POST an Origin that is the page's
//     own, the one it logged in from. The API's own routes still refuse
//     every Origin not allowed by --allow-origin.
//   - What is shown: the script puts every string in the page as text
//     (textContent), never as markup, and the Content-Security-Policy
//     allows only the page's own script and style: a command whose words
//     are markup is shown, not run.

const pagePath = "/approvals"

//go:embed page/approvals.html
var pageHTML []byte

//go:embed page/approvals.js
var pageJS []byte

//go:embed page/approvals.css
var pageCSS []byte

// csp allows the page's own script, style and requests, nothing else.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const (
	cookieName = "moat_approvals"
	csrfHeader = "X-Moat-Csrf"
	// webTTL is how long a web session lasts after its login.
	webTTL = 12 * time.Hour
)

// webAuth holds the login codes and web sessions of the page.
type webAuth struct {
	mu       sync.Mutex
	codes    map[string]webCode
	sessions map[string]*webSession
	made     uint64 // page sessions made so far: their order
}

type webCode struct {
	tenant  daemon.Tenant
	expires time.Time
}

type webSession struct {
	n       uint64 // its place in the order of logins
	tenant  daemon.Tenant
	csrf    string
	host    string
	origin  string // the page's origin at login: its POSTs must come from it
	expires time.Time
}

func randomHex() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// maxCodes bounds a tenant's login codes not used yet, which it could
// otherwise ask for without end; the bound is each tenant's, so that one
// tenant's asking does not lock the others out of the page.
const maxCodes = 16

// newCode makes a login code for t, valid once until ttl from now.
func (a *webAuth) newCode(t daemon.Tenant, ttl time.Duration) (string, time.Time, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if a.codes == nil {
		a.codes = map[string]webCode{}
	}
	for c, wc := range a.codes {
		if now.After(wc.expires) {
			delete(a.codes, c)
		}
	}
	n := 0
	for _, wc := range a.codes {
		if wc.tenant.ID == t.ID {
			n++
		}
	}
	if n >= maxCodes {
		return "", time.Time{}, &client.Error{Status: http.StatusTooManyRequests, Code: client.CodeQuota,
			Message: fmt.Sprintf("%d login links wait to be used: try again in a few minutes", maxCodes)}
	}
	code := randomHex()
	a.codes[code] = webCode{tenant: t, expires: now.Add(ttl)}
	return code, now.Add(ttl), nil
}

// useCode returns the tenant of a valid code and forgets the code.
func (a *webAuth) useCode(code string) (daemon.Tenant, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for c, wc := range a.codes {
		if subtle.ConstantTimeCompare([]byte(c), []byte(code)) == 1 {
			delete(a.codes, c)
			return wc.tenant, time.Now().Before(wc.expires)
		}
	}
	return daemon.Tenant{}, false
}

// maxWebSessions bounds a tenant's page sessions (one per login, each
// lasting webTTL): a tenant that logs in again and again would otherwise
// grow the daemon's memory without end. Past it, a login ends the
// tenant's oldest page session rather than being refused, so that a
// person opening the page anew is never locked out.
const maxWebSessions = 32

// newSession starts a page session of t for the Host host, whose page
// has the origin origin.
func (a *webAuth) newSession(t daemon.Tenant, host, origin string) (id string, ws *webSession) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if a.sessions == nil {
		a.sessions = map[string]*webSession{}
	}
	oldest, n := "", 0
	for k, ws := range a.sessions {
		switch {
		case now.After(ws.expires):
			delete(a.sessions, k)
		case ws.tenant.ID == t.ID:
			n++
			if oldest == "" || ws.n < a.sessions[oldest].n {
				oldest = k
			}
		}
	}
	if n >= maxWebSessions {
		delete(a.sessions, oldest)
	}
	id = randomHex()
	a.made++
	ws = &webSession{n: a.made, tenant: t, csrf: randomHex(), host: host, origin: origin, expires: now.Add(webTTL)}
	a.sessions[id] = ws
	return id, ws
}

// session returns the web session r's cookie names, if it is valid for
// r's Host, and whether csrf is its token. r may name several: a cookie
// is bound to no port, and another server on the daemon's host may set
// one of the page's name with a longer path, which the browser sends
// first ("cookie tossing"); the one whose token the page sent is the
// page's, and the others would lock it out.
func (a *webAuth) session(r *http.Request, csrf string) (id string, ws *webSession, csrfOK, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	for _, c := range r.CookiesNamed(cookieName) {
		w, found := a.sessions[c.Value]
		if !found || now.After(w.expires) || w.host != r.Host {
			continue
		}
		if subtle.ConstantTimeCompare([]byte(csrf), []byte(w.csrf)) == 1 {
			return c.Value, w, true, true
		}
		if !ok {
			id, ws, ok = c.Value, w, true
		}
	}
	return id, ws, false, ok
}

func (a *webAuth) end(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, id)
}

// isPageOrigin says whether o is an origin a browser gives requests of
// the page as r reaches the daemon: its Host, over HTTPS when the daemon
// serves TLS, else over either scheme. The daemon serves plain HTTP,
// and behind the TLS proxy it is meant to sit behind, the browser's
// origin is https:// at the same Host while r is plain HTTP. Neither
// scheme opens more than the other: both name the Host the request was
// sent to, which only the daemon (or its proxy) serves, and a page
// session's POSTs must come from the origin it logged in from.
func isPageOrigin(r *http.Request, o string) bool {
	if o == "https://"+r.Host {
		return true
	}
	return r.TLS == nil && o == "http://"+r.Host
}

// samePageOrigin says whether r is a request of the approvals page from
// its own origin (o): the only origin its routes take beyond
// --allow-origin.
func samePageOrigin(r *http.Request, o string) bool {
	return (r.URL.Path == pagePath || strings.HasPrefix(r.URL.Path, pagePath+"/")) && isPageOrigin(r, o)
}

func (s *Server) pageRoutes() {
	s.mux.HandleFunc("GET "+pagePath, s.pageAsset(pageHTML, "text/html; charset=utf-8"))
	s.mux.HandleFunc("GET "+pagePath+"/app.js", s.pageAsset(pageJS, "text/javascript; charset=utf-8"))
	s.mux.HandleFunc("GET "+pagePath+"/app.css", s.pageAsset(pageCSS, "text/css; charset=utf-8"))
	s.mux.HandleFunc("POST "+pagePath+"/login", s.pageHandler(s.pageLogin, false))
	s.mux.HandleFunc("POST "+pagePath+"/logout", s.pageHandler(s.pageLogout, true))
	s.mux.HandleFunc("GET "+pagePath+"/state", s.pageHandler(s.pageState, true))
	s.mux.HandleFunc("POST "+pagePath+"/{id}/approve", s.pageHandler(s.pageApprove, true))
	s.mux.HandleFunc("POST "+pagePath+"/{id}/deny", s.pageHandler(s.pageDeny, true))
}

// pageHeaders are every answer of the page's: the policy, no caching, no
// framing, no referrer.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

func (s *Server) pageAsset(body []byte, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w)
		w.Header().Set("Content-Type", ctype)
		w.Write(body)
	}
}

func errNotPage() error {
	return &client.Error{Status: http.StatusForbidden, Code: client.CodeOriginRefused, Message: "only the approvals page itself may send this request"}
}

func errNoWebSession() error {
	return &client.Error{Status: http.StatusUnauthorized, Code: client.CodeUnauthorized,
		Message: "not logged in: open the link `moat approvals --web` prints"}
}

// pageHandler serves one of the page's requests: with auth, only in a
// valid web session and with its CSRF token.
func (s *Server) pageHandler(h func(http.ResponseWriter, *http.Request, string, *webSession) error, auth bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w)
		s.bodyDeadline(w, r)
		var id string
		var ws *webSession
		err := func() error {
			// A browser names the origin of every POST: one that names
			// none, or another, did not come from the page.
			origin := r.Header.Get("Origin")
			if r.Method != http.MethodGet && !isPageOrigin(r, origin) {
				return errNotPage()
			}
			if !auth {
				return nil
			}
			var csrfOK, ok bool
			if id, ws, csrfOK, ok = s.web.session(r, r.Header.Get(csrfHeader)); !ok {
				return errNoWebSession()
			}
			if r.Method != http.MethodGet && origin != ws.origin {
				return errNotPage()
			}
			// Every request, a GET too, must carry the CSRF token: a cookie
			// is not bound to a port, so the browser also sends it to any
			// other server on the daemon's host (another user's on
			// 127.0.0.1:OTHER), and the cookie alone must not read the
			// approvals or the token. The page keeps its token where only
			// its own origin (port included) reaches it.
			if !csrfOK {
				if r.Method == http.MethodGet {
					return errNoWebSession()
				}
				return &client.Error{Status: http.StatusForbidden, Code: client.CodeOriginRefused, Message: "the request lacks the page's CSRF token"}
			}
			return nil
		}()
		if err == nil {
			err = h(w, r, id, ws)
		}
		if err != nil {
			s.fail(w, r, err)
		}
	}
}

type loginRequest struct {
	Code  string `json:"code,omitempty"`
	Token string `json:"token,omitempty"`
}

func (s *Server) pageLogin(w http.ResponseWriter, r *http.Request, _ string, _ *webSession) error {
	var req loginRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	var t daemon.Tenant
	ok := false
	switch {
	case req.Code != "":
		t, ok = s.web.useCode(req.Code)
	case req.Token != "" && s.Tokens != nil:
		var name string
		var role daemon.Role
		if name, role, ok = s.Tokens.Lookup(req.Token); ok {
			t = daemon.TokenTenantRole(name, role)
			if err := t.MayApprovals(); err != nil {
				return err
			}
		}
	}
	if !ok {
		return &client.Error{Status: http.StatusUnauthorized, Code: client.CodeUnauthorized,
			Message: "the login link has expired or was used already: ask for another with moat approvals --web"}
	}
	// The origin was checked (pageHandler): an https:// one is the
	// browser's side of TLS, the daemon's own or its proxy's, and the
	// cookie goes only over TLS from then on.
	origin := r.Header.Get("Origin")
	id, ws := s.web.newSession(t, r.Host, origin)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: pagePath, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: strings.HasPrefix(origin, "https://"), MaxAge: int(webTTL / time.Second)})
	s.Logger.Info("approvals page login", "tenant", t.ID)
	return writeJSON(w, http.StatusOK, map[string]string{"tenant": t.ID, "csrf": ws.csrf})
}

func (s *Server) pageLogout(w http.ResponseWriter, r *http.Request, id string, ws *webSession) error {
	s.web.end(id)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: pagePath, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: strings.HasPrefix(ws.origin, "https://"), MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pageState is what the page shows: the pending approvals, the daemon's
// clock (for their age and time left) and the CSRF token of its POSTs.
func (s *Server) pageState(w http.ResponseWriter, r *http.Request, _ string, ws *webSession) error {
	return writeJSON(w, http.StatusOK, map[string]any{
		"tenant": ws.tenant.ID, "csrf": ws.csrf, "now": time.Now(),
		"approvals": s.approvalsJSON(s.Manager.Approvals(ws.tenant)),
	})
}

func (s *Server) pageApprove(w http.ResponseWriter, r *http.Request, _ string, ws *webSession) error {
	var req client.ApproveRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		req.Name = "web"
	}
	return s.answerApprove(w, r.PathValue("id"), ws.tenant, &req)
}

func (s *Server) pageDeny(w http.ResponseWriter, r *http.Request, _ string, ws *webSession) error {
	var req client.DenyRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		req.Name = "web"
	}
	if _, err := s.Manager.Deny(ws.tenant, r.PathValue("id"), req.Name, req.Why); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
