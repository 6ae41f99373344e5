package egress

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// Request trailers: a chunked request body may end with header fields
// (RFC 9112 7.1.2), which net/http reads into Request.Trailer only when
// the body ends, and which Request.Write sends after the body: long after
// apply decided the request's headers. A placeholder there is decided at
// that point, as one in a header would have been: replaced on a request
// its secret is for, refused anywhere else. A refusal then can no longer
// stop the request's headers and body, which have gone; it stops the
// trailers, and the request with them, by closing the connection to the
// destination before they are written, so the destination gets a request
// that never ends, and the command a 403.

// errTrailerRefused ends a request body whose trailers were refused.
var errTrailerRefused = errors.New("the request's trailers were refused")

// trailerCheck is a request body that, at its end, when net/http has read
// the request's trailers, has them decided by check, and on a refusal
// closes conn and fails the read instead of ending it, so that
// Request.Write never sends them. Its fields are read only once the
// request's write is over (roundTrip's done channel orders the two).
type trailerCheck struct {
	io.ReadCloser
	req   *http.Request
	conn  net.Conn
	check func(tr http.Header) (added []string, rule, reason string)
	// declared is whether the request declared trailers: only then does
	// Request.Write send any (all it read, declared or not).
	declared bool

	checked      bool // check runs once, should Read be called again
	added        []string
	rule, reason string
}

func (b *trailerCheck) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.rule != "" {
		return 0, errTrailerRefused
	}
	if err == io.EOF && len(b.req.Trailer) > 0 && !b.checked {
		b.checked = true
		b.added, b.rule, b.reason = b.check(b.req.Trailer)
		if !b.declared {
			b.added = nil // put in, but never sent
		}
		if b.rule != "" {
			// Closed under its TLS, if any: a close_notify alert would
			// end the request cleanly, and a server that took that for
			// the body's end could answer before the refusal.
			if tc, ok := b.conn.(*tls.Conn); ok {
				tc.NetConn().Close()
			}
			b.conn.Close()
			return n, errTrailerRefused
		}
	}
	return n, err
}

// checkTrailers wraps req's body, if it is chunked, in a trailerCheck
// that decides its trailers with check when they arrive; nil if it is
// not (only a chunked body has trailers).
func checkTrailers(req *http.Request, conn net.Conn, check func(http.Header) ([]string, string, string)) *trailerCheck {
	if req.Body == nil || req.Body == http.NoBody || len(req.TransferEncoding) == 0 {
		return nil
	}
	tc := &trailerCheck{ReadCloser: req.Body, req: req, conn: conn, check: check, declared: req.Trailer != nil}
	req.Body = tc
	return tc
}

// headerOnly are the fields a request may not send as trailers (RFC 9110
// 6.5.1: those that frame or route a request, modify or authenticate it,
// or control its response), and the method- and path-override headers: the proxy's
// checks read them in the headers (the Host check, the rules' method and path),
// and a server or front end that merged trailers into the headers would
// read one sent after them unchecked.
var headerOnly = append([]string{"Host", "Authorization", "Proxy-Authorization", "Cookie", "Content-Length", "Transfer-Encoding",
	"Trailer", "Te", "Connection", "Keep-Alive", "Upgrade", "Expect", "Max-Forwards", "Range", "If-Range", "Content-Type",
	"Content-Encoding", "Content-Range", "Cache-Control", "Pragma", "Forwarded", "X-Forwarded-Host"}, append(MethodOverrides, PathOverrides...)...)

// forbiddenTrailer refuses trailers tr that carry a field of headerOnly:
// a rule and a reason naming it, or "".
func forbiddenTrailer(tr http.Header) (rule, reason string) {
	for k := range tr {
		for _, h := range headerOnly {
			if strings.EqualFold(strings.ReplaceAll(k, "_", "-"), h) {
				return "bad trailer", fmt.Sprintf("the request sends %s as a trailer, after its body: a field that routes, frames, authenticates or names the method of a request is refused there, where moat's checks of the headers do not see it", h)
			}
		}
	}
	return "", ""
}

// placeholderInTrailer names where in the trailers tr the placeholder ph
// is, and whether it is in a trailer's value, the one place it can be
// replaced; or "". A trailer's name is compared without regard to case,
// since net/http sends it in canonical case. Basic credentials in a
// trailer are refused rather than encoded again: no client sends them
// there.
func placeholderInTrailer(tr http.Header, ph string) (where string, inValue bool) {
	lph := strings.ToLower(ph)
	for k, vs := range tr {
		if strings.Contains(strings.ToLower(k), lph) {
			return "a trailer's name", false
		}
		for _, v := range vs {
			if strings.Contains(v, ph) {
				return "the " + k + " trailer", true
			}
			if d, ok := decodeBasic(v); ok && strings.Contains(d, ph) {
				return "the " + k + " trailer's Basic credentials", false
			}
		}
	}
	return "", false
}

// plainTrailers refuses trailers of a plain-HTTP request that carry a
// placeholder, as checkPlain refuses its headers.
func (s *Secrets) plainTrailers(tr http.Header) (added []string, rule, reason string) {
	if s == nil {
		return nil, "", ""
	}
	for i := range s.list {
		c := &s.list[i]
		if where, _ := placeholderInTrailer(tr, c.Placeholder); where != "" {
			return nil, "secret placeholder", fmt.Sprintf("the request carries the placeholder of secret %s in %s; secrets are added over HTTPS only, to %s",
				c.Name, where, strings.Join(c.Hosts, ", "))
		}
	}
	return nil, "", ""
}

// applyTrailers decides the trailers tr of req, an intercepted request to
// host:port that apply has already decided and changed: each placeholder
// in a trailer's value becomes its secret's value if the secret would go
// in a header of req (its host, method and path; no header template, the
// one header it goes in; no method-override header naming another
// method), and anything else with a placeholder is refused. Every
// placeholder is decided before any value is put in.
func (s *Secrets) applyTrailers(req *http.Request, tr http.Header, host string, port int) (added []string, rule, reason string) {
	var use []*secret
	for i := range s.list {
		c := &s.list[i]
		where, inValue := placeholderInTrailer(tr, c.Placeholder)
		if where == "" {
			continue
		}
		ok := inValue && c.headerName == "" && c.forHost(host, port) && c.methodOK(req.Method) && c.overriddenMethod(req.Header) == "" &&
			c.pathOK(req.URL.Path) && (len(c.Paths) == 0 || len(pathOverrides(req.Header)) == 0) && (len(c.Paths) == 0 || plainPath(req.URL))
		if !ok {
			return nil, "secret placeholder", fmt.Sprintf("the placeholder of secret %s was sent in %s to %s %s, which it is not for (it is for %s, in a header's value)",
				c.Name, where, req.Method, host+req.URL.Path, describeSecret(c))
		}
		use = append(use, c)
	}
	for _, c := range use {
		for _, vs := range tr {
			for j, v := range vs {
				if strings.Contains(v, c.Placeholder) {
					vs[j] = strings.ReplaceAll(v, c.Placeholder, c.Value)
					added = appendOnce(added, c.Name)
				}
			}
		}
	}
	return added, "", ""
}
