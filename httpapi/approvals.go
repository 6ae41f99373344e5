package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/harness"
)

// The approvals API: the pending approvals of package daemon, listed,
// shown, approved and denied by the tenant of their session (or the
// daemon's own user). The web page over the same answers is page.go.

// approvalJSON shows p; a working directory in a workspace the daemon
// made is shown beneath "<state>", as in error texts.
func (s *Server) approvalJSON(p *daemon.Approval) *client.Approval {
	return &client.Approval{
		ID: p.ID, Session: p.Session, Tenant: p.Tenant, Command: p.What(), Dir: s.scrub(p.Dir), Network: p.Request != nil,
		Rule: p.Rule, Reason: p.Reason, Decided: p.Decided, Diff: s.scrub(p.Diff), Created: p.Created, Expires: p.Expires,
	}
}

func (s *Server) approvalsJSON(list []*daemon.Approval) []*client.Approval {
	out := []*client.Approval{}
	for _, p := range list {
		out = append(out, s.approvalJSON(p))
	}
	return out
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	return writeJSON(w, http.StatusOK, map[string]any{"approvals": s.approvalsJSON(s.Manager.Approvals(t))})
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	p, err := s.Manager.GetApproval(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.approvalJSON(p))
}

func (s *Server) approve(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	var req client.ApproveRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	return s.answerApprove(w, r.PathValue("id"), t, &req)
}

func (s *Server) answerApprove(w http.ResponseWriter, id string, t daemon.Tenant, req *client.ApproveRequest) error {
	ttl, err := duration("for", req.For)
	if err != nil {
		return err
	}
	switch harness.Scope(req.Scope) {
	case "", harness.ScopeOnce, harness.ScopePrefix, harness.ScopeSession:
	default:
		return badRequest("scope: %q is not once, prefix or session", req.Scope)
	}
	if _, err := s.Manager.Approve(t, id, daemon.ApproveRequest{
		Scope: harness.Scope(req.Scope), Prefix: req.Prefix, For: ttl, Name: req.Name, Why: req.Why,
	}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) deny(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	var req client.DenyRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if _, err := s.Manager.Deny(t, r.PathValue("id"), req.Name, req.Why); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// loginTTL is how long a login link works (once).
const loginTTL = 5 * time.Minute

func (s *Server) webLogin(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	var req struct{}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	code, exp, err := s.web.newCode(t, loginTTL)
	if err != nil {
		return err
	}
	out := &client.WebLogin{Code: code, Expires: exp}
	switch {
	case s.WebURL != "":
		// Checked by CheckWebURL where it was set; a bad one here
		// gives no link rather than a wrong one.
		if base, err := CheckWebURL(s.WebURL); err == nil {
			out.URL = base + pagePath + "#code=" + code
		}
	case s.WebAddr != "":
		out.URL = "http://" + s.WebAddr + pagePath + "#code=" + code
		if host, port, ok := strings.Cut(s.WebAddr, ":"); ok && (host == "" || host == "0.0.0.0" || host == "[::]") {
			out.URL = "http://127.0.0.1:" + port + pagePath + "#code=" + code
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// CheckWebURL checks the origin a browser reaches the approvals page at
// (Server.WebURL) and returns it in the form the login links use:
// http or https, a host, no user information, and no path, query or
// fragment, since the page's routes are at fixed paths and its session
// is bound to the origin it logged in from.
func CheckWebURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL", s)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q: the scheme must be http or https", s)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("%q has no host", s)
	case u.User != nil:
		return "", fmt.Errorf("%q: user information is not allowed", s)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || u.ForceQuery:
		return "", fmt.Errorf("%q: only an origin (scheme://host[:port]) is allowed, the page is served at %s", s, pagePath)
	}
	return u.Scheme + "://" + u.Host, nil
}
