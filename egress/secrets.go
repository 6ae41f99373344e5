package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Secret is a credential the proxy adds to the requests it is for. Inside
// the sandbox the command holds only Placeholder; the proxy puts Value in
// its place, in the request headers (also inside a header's Basic
// credentials: see basicCreds), on requests to Hosts (and, when set,
// with one of Methods and a path below one of Paths), and refuses a
// request that carries the placeholder anywhere else. With Header set
// ("Authorization: Bearer {value}"), the proxy instead sets that header
// on every such request, and only that header gets the value: the command
// need not send the placeholder at all, and a placeholder in any other
// header is refused (a server that echoes a header back would hand the
// command the value). Either way the value is replaced by the placeholder
// in the responses relayed back from a secret's hosts: status, headers,
// trailers and body (see scrubBody).
type Secret struct {
	Name        string
	Placeholder string
	Value       string
	// Hosts are destinations in the grammar of [network] allow entries:
	// "host", "*.domain", either with ":port".
	Hosts   []string
	Methods []string
	Paths   []string
	Header  string
	// Query, when set, is a query parameter the placeholder may be sent
	// as: on a request the secret is for, a placeholder that is that
	// parameter's whole value becomes the value (percent-encoded). A
	// placeholder anywhere else in a URL is refused. Not with Header.
	Query string
}

// Secrets is the compiled set of a run's secrets and the certificate
// authority the proxy intercepts their hosts' TLS with. Build it with
// NewSecrets; the CA's private key never leaves this process.
type Secrets struct {
	list  []secret
	ca    *authority
	roots *x509.CertPool
	// resume keeps the real servers' TLS sessions, so that a new
	// connection to a secret's host resumes one (no certificate to send
	// or verify again) rather than making a full handshake. A session is
	// kept under its host's name and comes from a handshake that verified
	// that host against roots.
	resume tls.ClientSessionCache

	// What the scrubbers replace (see patterns), whether every
	// placeholder is as long as its value (and so every placeholder form
	// as long as its value form), and the scrubbers' buffers.
	pats    atomic.Pointer[patterns]
	sameLen bool
	bufs    sync.Pool

	// basicMu guards adding the Basic credentials apply sent to pats;
	// basic holds them (as sent, base64), at most maxBasic.
	basicMu  sync.Mutex
	basic    map[string]bool
	maxBasic int
}

// patterns is what the scrubbers put in place of what: vals[i] becomes
// phs[i]. It starts as each secret's value and placeholder; apply adds
// the Basic credentials it sends (see basicForm). A patterns is never
// changed once stored in Secrets.pats: an addition stores a longer copy,
// so that a reader holds a consistent set without a lock.
type patterns struct {
	vals, phs [][]byte
	svals     []string // vals, as strings
	sphs      []string
	hold      int // one less than the longest of vals
	// replacer scrubs a string (see scrub): the longest of vals first,
	// since at each place it takes the first that starts there.
	replacer *strings.Replacer
}

// with returns a copy of p with val and ph added.
func (p *patterns) with(val, ph string) *patterns {
	n := len(p.vals)
	q := &patterns{
		vals:  append(p.vals[:n:n], []byte(val)),
		phs:   append(p.phs[:n:n], []byte(ph)),
		svals: append(p.svals[:n:n], val),
		sphs:  append(p.sphs[:n:n], ph),
		hold:  max(p.hold, len(val)-1),
	}
	order := make([]int, n+1)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return len(q.svals[j]) - len(q.svals[i]) })
	pairs := make([]string, 0, 2*len(order))
	for _, i := range order {
		pairs = append(pairs, q.svals[i], q.sphs[i])
	}
	q.replacer = strings.NewReplacer(pairs...)
	return q
}

// quotedForms are the spellings of v inside Go's quotes (strconv.Quote
// and QuoteToASCII, without the quotes) that differ from v.
func quotedForms(v string) []string {
	var out []string
	for _, q := range []string{strconv.Quote(v), strconv.QuoteToASCII(v)} {
		if q = q[1 : len(q)-1]; q != v && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

type secret struct {
	Secret
	hosts       []hostRule
	headerName  string
	headerValue string // the template, "{value}" still in it
}

// PlaceholderPrefix starts every placeholder: "moat-secret-NAME-RANDOM".
const PlaceholderPrefix = "moat-secret-"

// NewPlaceholder returns a fresh placeholder for the secret name.
func NewPlaceholder(name string) string {
	var b [12]byte
	rand.Read(b[:])
	return PlaceholderPrefix + strings.ToLower(name) + "-" + hex.EncodeToString(b[:])
}

// NewSecrets checks list and creates the CA that signs the certificates
// the proxy shows for the secrets' hosts. roots verifies the real
// servers' certificates; nil means the host's roots.
func NewSecrets(list []Secret, roots *x509.CertPool) (*Secrets, error) {
	s := &Secrets{roots: roots, resume: tls.NewLRUClientSessionCache(64)}
	var domains []string
	for _, sec := range list {
		if sec.Value == "" {
			return nil, fmt.Errorf("secret %s: empty value", sec.Name)
		}
		if !strings.HasPrefix(sec.Placeholder, PlaceholderPrefix) || strings.Contains(sec.Value, sec.Placeholder) {
			return nil, fmt.Errorf("secret %s: bad placeholder", sec.Name)
		}
		c := secret{Secret: sec}
		for _, h := range sec.Hosts {
			r, err := parseHostRule(h, true)
			if err != nil {
				return nil, fmt.Errorf("secret %s: host %q: %v", sec.Name, h, err)
			}
			c.hosts = append(c.hosts, r)
			domains = append(domains, r.Domain)
		}
		if sec.Query != "" && (sec.Header != "" || strings.ContainsAny(sec.Query, "&=#")) {
			return nil, fmt.Errorf("secret %s: query %q: want a parameter's name, and no header template", sec.Name, sec.Query)
		}
		if sec.Header != "" {
			name, val, ok := strings.Cut(sec.Header, ":")
			if !ok || !strings.Contains(val, "{value}") {
				return nil, fmt.Errorf("secret %s: header %q: want \"Name: template with {value}\"", sec.Name, sec.Header)
			}
			c.headerName, c.headerValue = http.CanonicalHeaderKey(strings.TrimSpace(name)), strings.TrimSpace(val)
		}
		s.list = append(s.list, c)
	}
	s.sameLen = true
	pats := new(patterns)
	maxHold := base64.StdEncoding.EncodedLen(maxBasicLen) - 1
	for _, c := range s.list {
		pats = pats.with(c.Value, c.Placeholder)
		s.sameLen = s.sameLen && len(c.Value) == len(c.Placeholder)
		// A value sent in a query parameter goes percent-encoded, and a
		// server that echoes its URL echoes that. (A placeholder is the
		// same encoded.)
		if enc := url.QueryEscape(c.Value); c.Query != "" && enc != c.Value {
			pats = pats.with(enc, c.Placeholder)
			s.sameLen = s.sameLen && len(enc) == len(c.Placeholder)
		}
		// Go quotes a text it reports (%q, as net/http quotes a
		// malformed status line in the error the proxy relays): a value
		// with a quote, a backslash, a control or a byte that is not
		// UTF-8 in it comes back escaped (found by a tester).
		for _, q := range quotedForms(c.Value) {
			pats = pats.with(q, c.Placeholder)
			s.sameLen = s.sameLen && len(q) == len(c.Placeholder)
		}
	}
	s.pats.Store(pats)
	s.basic, s.maxBasic = map[string]bool{}, maxBasicCreds
	// Room for the longest pattern there can be, a Basic credential's,
	// held back.
	size := scrubBufSize + max(pats.hold, maxHold)
	s.bufs.New = func() any { b := make([]byte, size); return &b }
	slices.Sort(domains)
	ca, err := newAuthority(slices.Compact(domains))
	if err != nil {
		return nil, err
	}
	s.ca = ca
	return s, nil
}

// CACertPEM is the certificate of the CA, for the sandbox's trust store.
func (s *Secrets) CACertPEM() []byte { return s.ca.certPEM }

// intercepts reports whether a connection to host:port is one whose TLS
// the proxy terminates: a secret is for it.
func (s *Secrets) intercepts(host string, port int) bool {
	if s == nil || host == "" {
		return false
	}
	for i := range s.list {
		if s.list[i].forHost(host, port) {
			return true
		}
	}
	return false
}

func (c *secret) forHost(host string, port int) bool {
	for _, h := range c.hosts {
		if match(h, host, port) {
			return true
		}
	}
	return false
}

// methodOK reports whether the secret goes on a request with this
// method.
func (c *secret) methodOK(method string) bool {
	return len(c.Methods) == 0 || containsFold(c.Methods, method)
}

// pathOK reports whether the secret goes on a request for this path
// (decoded, and in plain form: see plainPath). A path is below a prefix
// on a segment boundary: "/api" covers "/api" and "/api/x", not "/apix".
func (c *secret) pathOK(path string) bool {
	if len(c.Paths) == 0 {
		return true
	}
	for _, p := range c.Paths {
		if path == p || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

// overriddenMethod returns the value of a method-override header of req
// that names a method outside the secret's methods, or "". A server that
// honours the header would read a GET carrying "X-HTTP-Method-Override:
// DELETE" as the DELETE the secret's methods leave out.
func (c *secret) overriddenMethod(h http.Header) string {
	if len(c.Methods) == 0 {
		return ""
	}
	for _, name := range MethodOverrides {
		for _, v := range headerValues(h, name) {
			if !containsFold(c.Methods, strings.TrimSpace(v)) {
				return v
			}
		}
	}
	return ""
}

// plainPath reports whether u's path is one that servers cannot read as
// another path than the proxy does, so that a secret limited by paths is
// checked against the path the server will serve. The proxy matches the
// decoded path while the server gets the path as the client sent it, and
// servers differ in what they normalise: "/api/../admin",
// "/api/%2e%2e/admin" and "/api%2F..%2Fadmin" are /admin to many. So the
// path must be origin-form, printable ASCII, with no encoded '.', '/',
// '\' or '%' (a server may decode twice), no '\', no empty segment and
// no segment made of dots (also before a ';' parameter, which Tomcat and
// others drop): what path.Clean leaves as it is.
func plainPath(u *url.URL) bool {
	if u.Opaque != "" {
		return false
	}
	esc := u.EscapedPath()
	if !strings.HasPrefix(esc, "/") {
		return false
	}
	for i := 0; i < len(esc); i++ {
		b := esc[i]
		if b == '%' {
			if i+2 >= len(esc) {
				return false
			}
			v, err := strconv.ParseUint(esc[i+1:i+3], 16, 8)
			if err != nil {
				return false
			}
			b, i = byte(v), i+2
			if b == '.' || b == '/' || b == '%' {
				return false
			}
		}
		if b == '\\' || b < 0x20 || b >= 0x7f {
			return false
		}
	}
	p, err := url.PathUnescape(esc)
	if err != nil {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if name, _, _ := strings.Cut(seg, ";"); name != "" && strings.Trim(name, ".") == "" {
			return false
		}
	}
	// One trailing slash is plain ("/api/users/"); path.Clean drops it.
	want := p
	if len(p) > 1 {
		want = strings.TrimSuffix(p, "/")
	}
	return path.Clean(p) == want
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

// leak returns the name of a secret whose placeholder is in s, or "".
func (s *Secrets) leak(v string) *secret {
	if s == nil || !strings.Contains(v, PlaceholderPrefix) {
		return nil
	}
	for i := range s.list {
		if strings.Contains(v, s.list[i].Placeholder) {
			return &s.list[i]
		}
	}
	return nil
}

// leakInUserinfo returns a secret whose placeholder is in the user
// information of u (user name or password, decoded), or nil. The proxy
// never forwards a URL's user information, so a placeholder there would
// be dropped unseen unless looked for: it is refused instead, on the
// secret's own host too, where a client sends it as Basic credentials.
func (s *Secrets) leakInUserinfo(u *url.URL) *secret {
	if u.User == nil {
		return nil
	}
	pw, _ := u.User.Password()
	if c := s.leak(u.User.Username()); c != nil {
		return c
	}
	return s.leak(pw)
}

// leakInURL returns a secret whose placeholder is in u, as sent or
// percent-decoded, or nil. The path and query are sent as the client
// wrote them, and a server decodes them: "moat%2Dsecret-..." is the
// placeholder to it. Decoding is repeated, since some servers and
// frameworks decode twice; an escape that is not one is left as it is.
func (s *Secrets) leakInURL(u *url.URL) *secret {
	v := u.String()
	for range 4 {
		if c := s.leak(v); c != nil {
			return c
		}
		d := unescapeLenient(v)
		if d == v {
			break
		}
		v = d
	}
	return s.leak(v)
}

// unescapeLenient decodes each valid %XX in v and leaves every other
// byte, a malformed escape included, as it is: url.PathUnescape would
// refuse the whole text for one bad escape, and a server may not.
func unescapeLenient(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) {
			if n, err := strconv.ParseUint(v[i+1:i+3], 16, 8); err == nil {
				b = append(b, byte(n))
				i += 2
				continue
			}
		}
		b = append(b, v[i])
	}
	return string(b)
}

// leakInNames returns a secret whose placeholder is in the name of a
// field of h, compared without regard to case (net/http sends names in
// canonical case, which a server reads as the same name), or nil.
func (s *Secrets) leakInNames(h http.Header) *secret {
	if s == nil {
		return nil
	}
	for k := range h {
		if c := s.leakFold(k); c != nil {
			return c
		}
	}
	return nil
}

// leakFold is leak without regard to case.
func (s *Secrets) leakFold(v string) *secret {
	lv := strings.ToLower(v)
	if s == nil || !strings.Contains(lv, PlaceholderPrefix) {
		return nil
	}
	for i := range s.list {
		if strings.Contains(lv, strings.ToLower(s.list[i].Placeholder)) {
			return &s.list[i]
		}
	}
	return nil
}

// refuseName returns a refusal of a destination name that carries a
// placeholder, and true; or false. A name goes out as it is, in the DNS
// query that resolves it, the TLS server name and the Host header, where
// no placeholder is ever replaced: a wildcard allow entry
// ("*.example.com") would otherwise let one out to any name below it.
func (s *Secrets) refuseName(host string) (Verdict, bool) {
	c := s.leakFold(host)
	if c == nil {
		// The name as the rules and the lookup see it, too: IDNA maps
		// other spellings (a fullwidth letter) to the placeholder's.
		if n, err := normalizeHost(host); err == nil && n != host {
			c = s.leakFold(n)
		}
	}
	if c == nil {
		return Verdict{}, false
	}
	return Verdict{Rule: "secret placeholder", Reason: fmt.Sprintf(
		"the destination name carries the placeholder of secret %s; moat adds secrets to headers only, and a name is sent as it is (DNS, TLS server name, Host)", c.Name)}, true
}

// checkPlain refuses a plain-HTTP request that carries a placeholder: a
// secret is sent over TLS only, and never to a host it is not for.
func (s *Secrets) checkPlain(req *http.Request) (rule, reason string) {
	if c, where := s.leakInRequest(req); c != nil {
		return "secret placeholder", fmt.Sprintf("the request carries the placeholder of secret %s%s; secrets are added over HTTPS only, to %s",
			c.Name, where, strings.Join(c.Hosts, ", "))
	}
	return "", ""
}

// leakInRequest returns a secret whose placeholder req carries, in its
// URL, a header, or a header's Basic credentials, and, for the last, " in
// the NAME header's Basic credentials"; or nil.
func (s *Secrets) leakInRequest(req *http.Request) (*secret, string) {
	if s == nil {
		return nil, ""
	}
	if c := s.leakInUserinfo(req.URL); c != nil {
		return c, " in the user information of its URL"
	}
	if c := s.leakInURL(req.URL); c != nil {
		return c, " in its URL"
	}
	if c := s.leakFold(req.Method); c != nil {
		return c, " in its method"
	}
	if c := s.leakInNames(req.Header); c != nil {
		return c, " in the name of a header"
	}
	if c := s.leakInNames(req.Trailer); c != nil {
		return c, " in the name of a trailer it declares"
	}
	for _, vs := range req.Header {
		for _, v := range vs {
			if c := s.leak(v); c != nil {
				return c, ""
			}
		}
	}
	for _, b := range basicCreds(req.Header) {
		if c := s.leak(b.dec); c != nil {
			return c, " in the " + b.key + " header's Basic credentials"
		}
	}
	return nil, ""
}

// apply puts the values of the secrets meant for req in place of their
// placeholders in its headers (also in Basic credentials: see
// basicCreds), and sets their header templates. It
// refuses (returns a rule and a reason) a request that carries the
// placeholder of a secret not meant for it, or a placeholder outside the
// headers, and a request a secret would go on whose path or
// method-override header could make the server read it as one the
// secret's paths or methods leave out: such a request is refused rather
// than sent without the secret, so that the refusal says why. It returns
// the names of the secrets added.
//
// Every secret is decided on the request as the command sent it before
// any value is put in: a refusal's reason quotes what the request
// carries (a method-override header), and goes to the command and the
// audit record, so it must never quote a value put in for another
// secret earlier in the list.
func (s *Secrets) apply(req *http.Request, host string, port int) (added []string, rule, reason string) {
	if c := s.leakInUserinfo(req.URL); c != nil {
		return nil, "secret placeholder", fmt.Sprintf("the placeholder of secret %s is in the user information of the request's URL; "+
			"moat adds secrets to headers only (a client sends a URL's user information as Basic credentials in the Authorization header)", c.Name)
	}
	if c := s.leakFold(req.Method); c != nil {
		return nil, "secret placeholder", fmt.Sprintf("the placeholder of secret %s is in the request's method; moat puts secrets in header values only", c.Name)
	}
	if c := s.leakInNames(req.Header); c != nil {
		return nil, "secret placeholder", fmt.Sprintf("the placeholder of secret %s is in the name of a header; moat puts secrets in header values only", c.Name)
	}
	if c := s.leakInNames(req.Trailer); c != nil {
		return nil, "secret placeholder", fmt.Sprintf("the placeholder of secret %s is in the name of a trailer the request declares; moat puts secrets in header values only", c.Name)
	}
	path := req.URL.Path
	basics := basicCreds(req.Header)
	var use []*secret
	for i := range s.list {
		c := &s.list[i]
		carrier := placeholderIn(req.Header, basics, c.Placeholder, "")
		inQuery := c.Query != "" && queryHas(req.URL.RawQuery, c.Query, c.Placeholder)
		if carrier == "" && inQuery {
			carrier = "the query parameter " + c.Query
		}
		notFor := func() (string, string) {
			return "secret placeholder", fmt.Sprintf("the placeholder of secret %s was sent in %s to %s %s, which it is not for (it is for %s)",
				c.Name, carrier, req.Method, host+path, describeSecret(c))
		}
		if !c.forHost(host, port) || !c.methodOK(req.Method) {
			if carrier != "" {
				rule, reason = notFor()
				return nil, rule, reason
			}
			continue
		}
		if carrier == "" && c.headerName == "" {
			continue // the secret has no part in this request
		}
		if m := c.overriddenMethod(req.Header); m != "" {
			return nil, "secret method", fmt.Sprintf("the request to %s carries a method-override header naming %q, and secret %s is for %s only",
				host, headerSafe(m), c.Name, strings.Join(c.Methods, "/"))
		}
		if o := pathOverrides(req.Header); len(c.Paths) > 0 && len(o) > 0 {
			return nil, "secret path", fmt.Sprintf("the request to %s carries a path-override header naming %q, which a server may serve instead of the request's path, and secret %s is for paths below %s only",
				host, headerSafe(o[0]), c.Name, strings.Join(c.Paths, ", "))
		}
		if len(c.Paths) > 0 && !plainPath(req.URL) {
			return nil, "secret path", fmt.Sprintf("the path %q is not in plain form (a dot segment, an empty segment, an encoded '.', '/', '\\' or '%%', a '\\', or a byte outside printable ASCII), "+
				"which a server may read as another path; secret %s is for paths below %s only", headerSafe(req.URL.EscapedPath()), c.Name, strings.Join(c.Paths, ", "))
		}
		if !c.pathOK(path) {
			if carrier != "" {
				rule, reason = notFor()
				return nil, rule, reason
			}
			continue
		}
		// With a template, the value goes in the template's header
		// only, which replaces whatever the command sent there (often
		// the placeholder, as with the real token).
		if c.headerName != "" {
			if k := placeholderIn(req.Header, basics, c.Placeholder, c.headerName); k != "" {
				return nil, "secret placeholder", fmt.Sprintf("the placeholder of secret %s was sent in %s; moat puts this secret in %s only (its header template), "+
					"and refuses its placeholder anywhere else", c.Name, k, c.headerName)
			}
		}
		use = append(use, c)
	}
	// The query as it will be sent: the placeholders that are the whole
	// value of their secret's parameter, on a request the secret is for,
	// replaced. A placeholder left anywhere in the URL is refused.
	query := req.URL.RawQuery
	for _, c := range use {
		if c.Query != "" {
			query = replaceQuery(query, c.Query, c.Placeholder, c.Value)
		}
	}
	u := *req.URL
	u.RawQuery = query
	if c := s.leakInURL(&u); c != nil {
		where := "moat adds secrets to headers only"
		if c.Query != "" {
			where = "moat puts this secret only in the query parameter " + c.Query + ", as its whole value, on the requests it is for"
		}
		return nil, "secret placeholder", fmt.Sprintf("the placeholder of secret %s is in the request's URL; %s", c.Name, where)
	}
	// Every secret is decided: the values go in. The templates first, so
	// that a placeholder in a header a template then replaces is not
	// counted as added.
	for _, c := range use {
		if c.headerName != "" {
			req.Header.Set(c.headerName, strings.ReplaceAll(c.headerValue, "{value}", c.Value))
			added = appendOnce(added, c.Name)
		}
	}
	for _, c := range use {
		if c.headerName != "" {
			continue
		}
		for _, vs := range req.Header {
			for j, v := range vs {
				if strings.Contains(v, c.Placeholder) {
					vs[j] = strings.ReplaceAll(v, c.Placeholder, c.Value)
					added = appendOnce(added, c.Name)
				}
			}
		}
		for j := range basics {
			if strings.Contains(basics[j].dec, c.Placeholder) {
				basics[j].dec = strings.ReplaceAll(basics[j].dec, c.Placeholder, c.Value)
				added = appendOnce(added, c.Name)
			}
		}
		if c.Query != "" && query != req.URL.RawQuery && queryHas(req.URL.RawQuery, c.Query, c.Placeholder) {
			added = appendOnce(added, c.Name)
		}
	}
	req.URL.RawQuery = query
	// The Basic credentials with values in them, encoded again; those a
	// template replaced are gone.
	for _, b := range basics {
		vs := req.Header[b.key]
		if b.dec == b.orig || b.j >= len(vs) || vs[b.j] != b.raw {
			continue
		}
		form, rule, reason := s.basicForm(b.dec, b.orig, b.key)
		if rule != "" {
			return nil, rule, reason
		}
		vs[b.j] = "Basic " + form
	}
	return added, "", ""
}

// carried returns those of the secrets named (added by apply) whose
// values are in req as it is sent: in a header, a header's Basic
// credentials, or its query. The request's hop-by-hop headers, and those
// its Connection header names, are dropped after apply, and a value put
// there is not sent.
func (s *Secrets) carried(req *http.Request, names []string) []string {
	var out []string
	for _, name := range names {
		for i := range s.list {
			c := &s.list[i]
			if c.Name != name {
				continue
			}
			in := headerWith(req.Header, c.Value, "") != "" ||
				c.Query != "" && strings.Contains(req.URL.RawQuery, url.QueryEscape(c.Value))
			for _, vs := range req.Header {
				for _, v := range vs {
					if d, ok := decodeBasic(v); ok && strings.Contains(d, c.Value) {
						in = true
					}
				}
			}
			if in {
				out = appendOnce(out, name)
			}
		}
	}
	return out
}

// headerWith returns the name of a header of h other than except whose
// value contains v, or "".
func headerWith(h http.Header, v, except string) string {
	for k, vs := range h {
		if k == except {
			continue
		}
		for _, x := range vs {
			if strings.Contains(x, v) {
				return k
			}
		}
	}
	return ""
}

// scrubResponse puts each secret's placeholder in place of its value in
// what of resp is relayed to the client: the status text, the headers
// (names and values), the trailers and the body (see scrubBody). A
// server that echoes a request header (a request id, a debugging
// endpoint, an error message) would otherwise hand the command the value
// it was never to hold. It returns why the response must be refused
// instead (a body the proxy cannot read), or "".
func (s *Secrets) scrubResponse(resp *http.Response) string {
	resp.Status = s.scrub(resp.Status)
	s.scrubHeader(resp.Header)
	if resp.Trailer != nil {
		// The declared trailers' names are here now; their values are
		// read into the same map at the end of the body, before
		// Response.Write sends them.
		s.scrubHeader(resp.Trailer)
		resp.Body = &trailerScrubber{ReadCloser: resp.Body, s: s, trailer: resp.Trailer}
	}
	return s.scrubBody(resp)
}

// scrub puts each secret's placeholder in place of its value in v, in one
// pass from the left, taking the longest value that starts at a place,
// as scrubBody does: replacing one value after another would break up a
// value that contains another's (its other bytes would then reach the
// command).
func (s *Secrets) scrub(v string) string {
	if r := s.pats.Load().replacer; r != nil {
		return r.Replace(v)
	}
	return v
}

func (s *Secrets) scrubHeader(h http.Header) {
	for k, vs := range h {
		for j, v := range vs {
			vs[j] = s.scrub(v)
		}
		if sk := s.scrubName(k); sk != k {
			delete(h, k)
			h[sk] = vs
		}
	}
}

// scrubName scrubs a header's name without regard to case: net/http
// reads a name into canonical case (CanonicalMIMEHeaderKey), which
// changes the case of a value a server put in it, and a server reads a
// name in any case as the same. A name with a value in it is returned in
// lower case, the values replaced (longest first, as scrub does).
func (s *Secrets) scrubName(k string) string {
	k = s.scrub(k)
	p := s.pats.Load()
	lk := strings.ToLower(k)
	var pairs []string
	for i, v := range p.svals {
		if lv := strings.ToLower(v); strings.Contains(lk, lv) {
			pairs = append(pairs, lv, p.sphs[i])
		}
	}
	if pairs == nil {
		return k
	}
	// Longest first: a value inside another must not break it up.
	order := make([]int, len(pairs)/2)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return len(pairs[2*j]) - len(pairs[2*i]) })
	sorted := make([]string, 0, len(pairs))
	for _, i := range order {
		sorted = append(sorted, pairs[2*i], pairs[2*i+1])
	}
	return strings.NewReplacer(sorted...).Replace(lk)
}

// trailerScrubber scrubs a response's trailers when its body ends, which
// is when net/http has read them.
type trailerScrubber struct {
	io.ReadCloser
	s       *Secrets
	trailer http.Header
}

func (b *trailerScrubber) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.s.scrubHeader(b.trailer)
	}
	return n, err
}

func describeSecret(c *secret) string {
	d := strings.Join(c.Hosts, ", ")
	if len(c.Methods) > 0 {
		d += " with " + strings.Join(c.Methods, "/")
	}
	if len(c.Paths) > 0 {
		d += " below " + strings.Join(c.Paths, ", ")
	}
	return d
}

func appendOnce(list []string, s string) []string {
	for _, e := range list {
		if e == s {
			return list
		}
	}
	return append(list, s)
}

// authority is a run's certificate authority: an ECDSA P-256 key made for
// the run, a certificate whose name constraints allow only the secrets'
// hosts (a client that checks them, as Go, OpenSSL and NSS do, trusts it
// for nothing else), and a certificate per intercepted host, made on
// first use.
type authority struct {
	key     *ecdsa.PrivateKey
	cert    *x509.Certificate
	certPEM []byte
	leafKey *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

func newAuthority(domains []string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("secrets: CA key: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("secrets: certificate key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                serial(),
		Subject:                     pkix.Name{CommonName: "moat sandbox CA (secrets for " + strings.Join(domains, ", ") + ")"},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(30 * 24 * time.Hour),
		IsCA:                        true,
		BasicConstraintsValid:       true,
		MaxPathLenZero:              true,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         domains,
		// No address either: a permitted DNS name leaves the IP
		// addresses unconstrained, and a secret is for names only.
		ExcludedIPRanges: []*net.IPNet{{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("secrets: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{key: key, cert: cert, leafKey: leafKey, leaves: map[string]*tls.Certificate{},
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// leaf returns the certificate the proxy shows for host.
func (a *authority) leaf(host string) (*tls.Certificate, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.leaves[host]; ok {
		return c, nil
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     a.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &a.leafKey.PublicKey, a.key)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: a.leafKey}
	a.leaves[host] = c
	return c, nil
}

// ProtoIntercepted is the Event.Proto of a request the proxy read inside
// a TLS connection it terminated for a secret's host.
const ProtoIntercepted = "https-intercepted"

// bufferedConn reads first what a bufio.Reader already holds.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// intercept serves a tunnel to a secret's host: it terminates the
// client's TLS with a certificate from the run's CA, opens TLS to the
// real server (verified against the host's roots), and forwards the HTTP
// requests read inside, each with its secrets added and its own event.
// The caller has sent the client its "connected" reply.
func (cc *clientConn) intercept(up net.Conn, t target, ev *Event) {
	p := cc.p
	defer p.untrack(up)
	host := t.name
	cc.lr.N = 1<<63 - 1
	cc.c.SetDeadline(time.Now().Add(p.headerTimeout()))
	var sni string
	client := tls.Server(&bufferedConn{Conn: cc.c, r: cc.br}, &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.0 too: curl -0 offers it alone, and the requests read
		// inside are HTTP/1.x either way.
		NextProtos: []string{"http/1.1", "http/1.0"},
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			sni = hi.ServerName
			if sni != "" && hostKey(sni) != host {
				return nil, fmt.Errorf("the TLS server name %q differs from the CONNECT target %s", sni, host)
			}
			return p.Secrets.ca.leaf(host)
		},
	})
	// The handshake with the real server goes on while the client's
	// does, rather than after it: one handshake's time less per
	// connection. It speaks only to the host the tunnel was decided for,
	// which is what it verifies, and nothing the client sends goes to the
	// server before both handshakes are done.
	server := tls.Client(up, &tls.Config{ServerName: host, RootCAs: p.Secrets.roots, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12,
		ClientSessionCache: p.Secrets.resume})
	ctx, cancel := context.WithTimeout(context.Background(), p.dialTimeout())
	defer cancel()
	upDone := make(chan error, 1)
	go func() { upDone <- server.HandshakeContext(ctx) }()
	if err := client.Handshake(); err != nil {
		cancel()
		up.Close() // ends the server's handshake, if it still runs
		<-upDone
		ev.SNI = sni
		why := fmt.Sprintf("the client's TLS handshake with moat's certificate for %s failed (does it trust moat's CA? SSL_CERT_FILE names it): %v", hostPort(host, t.port, 443), err)
		if sni != "" && hostKey(sni) != host {
			why = fmt.Sprintf("the client's TLS handshake for %s named another server (%q) than the tunnel's: refused", hostPort(host, t.port, 443), sni)
		}
		if strings.Contains(err.Error(), "unsupported application protocols") {
			why = fmt.Sprintf("the client's TLS handshake for %s offered only application protocols moat does not speak to a secret's host (%v): moat reads HTTP/1.1 and HTTP/1.0 there; have the client use HTTP/1.1 (curl --http1.1)", hostPort(host, t.port, 443), err)
		}
		ev.Decision, ev.Rule, ev.Reason = DecisionDeny, "tls interception", why
		cc.tell(ev)
		cc.c.Close()
		return
	}
	ev.SNI = sni
	cc.c.SetDeadline(time.Time{})
	err := <-upDone
	cancel()
	if err != nil {
		ev.Decision, ev.Rule, ev.Reason = DecisionError, "upstream tls", fmt.Sprintf("TLS to %s: %v", host, err)
		cc.tell(ev)
		writeStatus(client, http.StatusBadGateway, "", fmt.Sprintf("moat: TLS to %s failed: %v\n", host, err))
		client.Close()
		up.Close()
		return
	}
	ev.Decision = DecisionAllow
	ev.Reason = "intercepted: moat adds this host's secrets"
	// The requests inside, read as the proxy reads a client's.
	in := &clientConn{p: p, c: client, start: time.Now()}
	in.lr = io.LimitedReader{R: client, N: p.maxHeaderBytes()}
	in.rec.r = &in.lr
	in.br = bufio.NewReader(&in.rec)
	out := &upstream{conn: server, bw: bufio.NewWriter(server), host: host, port: t.port}
	out.reader()
	for first := true; ; first = false {
		if !first {
			client.SetReadDeadline(time.Now().Add(p.idleTimeout()))
			if _, err := in.br.Peek(1); err != nil {
				break
			}
			in.start = time.Now()
		}
		client.SetReadDeadline(time.Now().Add(p.headerTimeout()))
		in.lr.N = p.maxHeaderBytes()
		req, hosts, err := in.readRequest()
		if first && errors.Is(err, io.EOF) {
			break // the client closed after its handshake, asking nothing
		}
		if err != nil {
			in.badRequest(err, Event{Time: in.start, Proto: ProtoIntercepted, Host: t.name, Port: t.port, Addr: ev.Addr})
			break
		}
		client.SetReadDeadline(time.Time{})
		in.lr.N = 1<<63 - 1
		if !in.forwardIntercepted(req, hosts, out, t, ev) {
			break
		}
	}
	client.Close()
	server.Close()
}

// forwardIntercepted serves one request read inside an intercepted
// tunnel and reports whether the connection can carry another.
func (cc *clientConn) forwardIntercepted(req *http.Request, hosts []string, up *upstream, t target, tunnel *Event) bool {
	p := cc.p
	ev := &Event{Time: cc.start, Proto: ProtoIntercepted, Host: t.name, Port: t.port, Addr: tunnel.Addr,
		Method: req.Method, Path: req.URL.Path}
	defer cc.finish(ev)
	authority := t.name
	if t.port != 443 {
		authority = net.JoinHostPort(t.name, strconv.Itoa(t.port))
	}
	what := req.Method + " https://" + authority + req.URL.Path
	if req.Method == http.MethodConnect || req.URL.Host != "" && hostKey(req.URL.Hostname()) != t.name {
		ev.Decision, ev.Rule = DecisionError, "bad request"
		ev.Reason = fmt.Sprintf("a request inside the tunnel to %s must name a path on that host: it named %.200s", t.name, headerSafe(req.RequestURI))
		writeStatus(cc.c, http.StatusBadRequest, "", "moat: "+ev.Reason+"\n")
		return false
	}
	if cc.refuseHostHeader(ev, hosts, t.name, t.port, 443, what) {
		return false
	}
	// The rules narrowed by method or path, which the tunnel's check left
	// for its requests.
	if !p.check(Query{Host: t.name, Port: t.port, Method: req.Method, Path: req.URL.EscapedPath(),
		MethodOverrides: methodOverrides(req.Header), PathOverrides: pathOverrides(req.Header), Intercepted: true}, ev) {
		cc.refuse(ev, what)
		return false
	}
	added, rule, reason := p.Secrets.apply(req, t.name, t.port)
	if rule != "" {
		ev.Rule, ev.Reason = rule, reason
		cc.refuse(ev, what)
		return false
	}
	ev.Decision = DecisionAllow
	clientClose := req.Close
	removeHopHeaders(req.Header)
	req.Header.Del("Host")
	ev.Secrets = p.Secrets.carried(req, added)
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""}
	}
	req.Host = hostPort(t.name, t.port, 443)
	req.URL.Scheme, req.URL.Host, req.URL.User = "", "", nil
	req.Close = false
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		req.Header.Del("Expect")
		io.WriteString(cc.c, "HTTP/1.1 100 Continue\r\n\r\n")
	}
	// The proxy must read the response's body to scrub it (see
	// scrubBody): it asks for no coding it cannot decode.
	req.Header.Set("Accept-Encoding", acceptEncoding(req.Header.Values("Accept-Encoding")))
	emptyBody := req.ContentLength == 0 && len(req.TransferEncoding) == 0
	trailers := checkTrailers(req, up.conn, func(tr http.Header) ([]string, string, string) {
		if rule, reason := forbiddenTrailer(tr); rule != "" {
			return nil, rule, reason
		}
		return p.Secrets.applyTrailers(req, tr, t.name, t.port)
	})
	resp, upBytes, writeDone, err := roundTrip(up, req)
	if err != nil && trailers != nil && trailers.rule != "" {
		ev.Rule, ev.Reason = trailers.rule, trailers.reason
		cc.refuse(ev, what)
		return false
	}
	if err != nil && p.isClosed() {
		ev.Decision, ev.Reason = DecisionAllow, cutAtEnd
		return false
	}
	if err != nil {
		// net/http quotes a malformed status or header line in its
		// error, which a server can make of an echoed value.
		msg := p.Secrets.scrub(err.Error())
		ev.Decision, ev.Rule, ev.Reason = DecisionError, "upstream", msg
		cc.tell(ev)
		writeStatus(cc.c, http.StatusBadGateway, "", fmt.Sprintf("moat: %s: %s\n", what, msg))
		return false
	}
	removeHopHeaders(resp.Header)
	if reason := p.Secrets.scrubResponse(resp); reason != "" {
		// Refused unread: the connection goes, and the request's body
		// with it.
		up.conn.Close()
		<-writeDone
		ev.BytesUp = upBytes.n
		tunnel.BytesUp += ev.BytesUp
		tunnel.Inner += ev.BytesUp
		ev.Decision, ev.Rule, ev.Reason = DecisionDeny, "secret response encoding", reason
		cc.tell(ev)
		writeStatus(cc.c, http.StatusBadGateway, ev.Rule, fmt.Sprintf("moat: refused the response to %s\nrule: %s\n%s\n", what, ev.Rule, reason))
		return false
	}
	keep := !clientClose && !resp.Close && req.ProtoAtLeast(1, 1)
	if !req.ProtoAtLeast(1, 1) {
		resp.TransferEncoding = nil
	}
	resp.Close = !keep
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	werr, reqErr := cc.relay(resp, up, upBytes, writeDone, emptyBody, ev)
	tunnel.BytesUp += ev.BytesUp
	tunnel.BytesDown += ev.BytesDown
	tunnel.Inner += ev.BytesUp + ev.BytesDown
	if trailers != nil {
		// The destination answered before the request's end: its
		// response is relayed, and the trailers' fate recorded.
		if trailers.rule != "" {
			ev.Decision, ev.Rule, ev.Reason = DecisionDeny, trailers.rule, trailers.reason
			return false
		}
		for _, name := range trailers.added {
			ev.Secrets = appendOnce(ev.Secrets, name)
		}
	}
	return keep && werr == nil && reqErr == nil
}

// hostPort is host, with ":port" unless port is def.
func hostPort(host string, port, def int) string {
	if port == def {
		return host
	}
	return net.JoinHostPort(host, fmt.Sprint(port))
}

// queryHas reports whether the raw query has a parameter name whose value
// is ph.
func queryHas(raw, name, ph string) bool {
	_, found := rewriteQuery(raw, name, ph, "")
	return found
}

// replaceQuery returns the raw query with val (percent-encoded) as the
// value of each parameter name whose value is ph; every other byte of the
// query is left as it was sent (a server may sign it).
func replaceQuery(raw, name, ph, val string) string {
	q, _ := rewriteQuery(raw, name, ph, url.QueryEscape(val))
	return q
}

func rewriteQuery(raw, name, ph, val string) (string, bool) {
	if !strings.Contains(raw, name) {
		return raw, false
	}
	parts := strings.Split(raw, "&")
	found := false
	for i, p := range parts {
		k, v, _ := strings.Cut(p, "=")
		dk, err := url.QueryUnescape(k)
		if err != nil || dk != name {
			continue
		}
		if dv, err := url.QueryUnescape(v); err == nil && dv == ph {
			parts[i] = k + "=" + val
			found = true
		}
	}
	return strings.Join(parts, "&"), found
}
