package harness

import (
	"path"
	"strings"

	"github.com/moatbox/moat/internal/netrule"
	"github.com/moatbox/moat/policy"
)

// Request is a network destination the egress proxy is about to connect
// to, for DecideHost: Host is a name (DecideHost decides it normalised:
// lower-case ASCII, no trailing dot) or an address; Method and Path are those of a plain-HTTP request
// the proxy forwards, and empty in a tunnel (CONNECT, SOCKS5), whose
// requests it cannot see.
type Request struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// MethodOverrides are the values of the request's method-override
	// headers (X-HTTP-Method-Override and the like), which many servers
	// read as the request's method.
	MethodOverrides []string `json:"method_overrides,omitempty"`
	// PathOverrides are the values of its path-override headers
	// (X-Original-URL and the like), which some servers serve instead of
	// the request's path.
	PathOverrides []string `json:"path_overrides,omitempty"`
	// Intercepted says that the proxy reads the connection's requests
	// (a secret's host) and asks about each with its method and path: of
	// the connection (no Method), the rules narrowed by those are left
	// for its requests; of a request read inside it, the rules not
	// narrowed by them were decided with the connection (an ask is not
	// asked again for each request).
	Intercepted bool `json:"intercepted,omitempty"`
}

// hostRule is a compiled host rule of the policy.
type hostRule struct {
	ref  RuleRef
	r    policy.Rule
	kind Verdict
	host netrule.Host
	// folded is the rule's path in lower case, which a rule that
	// refuses or asks matches a request's lower-cased readings with.
	folded policy.Match
}

// match reports whether h is about q. A rule narrowed by method or path
// cannot be told apart in a tunnel: there it matches when it would refuse
// or ask (what cannot be seen is not assumed harmless), and not when it
// would allow (an allow for GET must not let a tunnel through).
func (h *hostRule) match(q Request, rc readingCache) bool {
	m := h.r.Match
	if m.Port != 0 && m.Port != q.Port {
		return false
	}
	if !matchHost(h.host, q.Host) {
		return false
	}
	if m.Method == "" && m.Path == "" {
		return !q.Intercepted || q.Method == ""
	}
	if q.Method == "" {
		return h.kind != Allow && !q.Intercepted
	}
	if m.Method != "" && !h.matchMethod(q) {
		return false
	}
	if m.Path != "" {
		return h.matchPaths(q, rc)
	}
	return true
}

// matchPaths matches the request's path and those its path-override
// headers name: a rule that refuses or asks matches if any does, an
// allow only if all do.
func (h *hostRule) matchPaths(q Request, rc readingCache) bool {
	ok := h.matchPath(q.Path, rc)
	for _, o := range q.PathOverrides {
		// An override may be a whole URL's path and query.
		o, _, _ = strings.Cut(strings.TrimSpace(o), "?")
		if h.kind == Allow {
			ok = ok && h.matchPath(o, rc)
		} else {
			ok = ok || h.matchPath(o, rc)
		}
	}
	return ok
}

// matchMethod matches a forwarded request's method against the rule's.
// Servers read a method in any case ("post" is a POST to most
// frameworks) and many honour a method-override header, so a rule that
// refuses or asks matches either, without regard to case; an allow
// matches the method as sent only, and only when no override names
// another.
func (h *hostRule) matchMethod(q Request) bool {
	want := h.r.Match.Method
	if h.kind == Allow {
		if q.Method != want {
			return false
		}
		for _, o := range q.MethodOverrides {
			if !strings.EqualFold(strings.TrimSpace(o), want) {
				return false
			}
		}
		return true
	}
	if strings.EqualFold(q.Method, want) {
		return true
	}
	for _, o := range q.MethodOverrides {
		if strings.EqualFold(strings.TrimSpace(o), want) {
			return true
		}
	}
	return false
}

// matchPath matches a forwarded request's path (as the client spelt it)
// against the rule's. Servers read a path in more ways than one: decoded
// (%63 is c), more than once where a front end decodes before the
// server, an invalid escape left as it is; with dot
// segments and doubled slashes gone; with each segment's ";" parameters
// dropped (Tomcat, Jetty, Spring); with "\" for "/" and a segment's
// trailing dots and spaces dropped (IIS); cut at a NUL (servers in C);
// in any case (IIS, file servers on macOS and Windows). A rule that
// refuses or asks matches any of those readings, and any mix of them;
// an allow matches the path as given only.
func (h *hostRule) matchPath(p string, rc readingCache) bool {
	if h.r.Match.MatchPath(p) {
		return true
	}
	if h.kind == Allow {
		return false
	}
	r := rc.of(p)
	if r.capped {
		// Readings past the bound were not looked at; one of them could
		// be the rule's path, so a rule that refuses or asks matches.
		return true
	}
	for _, v := range r.paths {
		if h.r.Match.MatchPath(v) || h.folded.MatchPath(strings.ToLower(v)) {
			return true
		}
	}
	return false
}

// readingCache holds the readings of the paths of one request, which
// each of the rules matches against.
type readingCache map[string]readings

func (rc readingCache) of(p string) readings {
	r, ok := rc[p]
	if !ok {
		r = pathReadings(p)
		rc[p] = r
	}
	return r
}

// readings are a path's readings; capped says the bounds stopped the
// search before its fixed point.
type readings struct {
	paths  []string
	capped bool
}

// maxReadings and maxReadingBytes bound pathReadings: a path spelt to
// have ever more readings gets the first ones, breadth first, and is
// marked capped, which rules that refuse or ask take as a match.
const (
	maxReadings     = 1024
	maxReadingBytes = 1 << 20
)

// pathReadings are the paths a server may read p as, p itself first:
// each reading matchPath names applied in turn, to a fixed point or
// maxReadings. An ordinary path has one or two.
func pathReadings(p string) readings {
	seen := map[string]bool{p: true}
	out, size := []string{p}, len(p)
	for i := 0; i < len(out); i++ {
		s := out[i]
		for _, v := range []string{
			unescapeLenient(s), stripParams(s), strings.ReplaceAll(s, `\`, "/"),
			trimSegments(s), cutNUL(s), cleanPath(s),
		} {
			if seen[v] {
				continue
			}
			if len(out) >= maxReadings || size+len(v) > maxReadingBytes {
				return readings{paths: out, capped: true}
			}
			seen[v] = true
			out = append(out, v)
			size += len(v)
		}
	}
	return readings{paths: out}
}

// unescapeLenient decodes each valid %XX of s and leaves the rest as it
// is, as most servers do (url.PathUnescape refuses the whole of a path
// with one bad escape in it).
func unescapeLenient(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// stripParams drops each segment's ";" parameters: "/a;x/b;y=1" is "/a/b".
func stripParams(p string) string {
	if !strings.Contains(p, ";") {
		return p
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i], _, _ = strings.Cut(s, ";")
	}
	return strings.Join(segs, "/")
}

// trimSegments drops each segment's trailing dots and spaces, as IIS
// (Windows' file names) reads "/admin./x" and "/admin /x"; "." and ".."
// stay.
func trimSegments(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if s != "." && s != ".." {
			segs[i] = strings.TrimRight(s, ". ")
		}
	}
	return strings.Join(segs, "/")
}

// cutNUL is p up to its first NUL byte, where a server in C stops.
func cutNUL(p string) string {
	p, _, _ = strings.Cut(p, "\x00")
	return p
}

// cleanPath is path.Clean of a rooted p; p itself otherwise.
func cleanPath(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return p
}

// DecideHost checks a destination against the policy's host rules: the
// strongest matching rule decides (deny beats ask beats allow; the first
// of that strength names the reason); none matching allows. It can only
// narrow what [network] allows: the proxy asks only about destinations
// its own lists let through.
func (rs *Rules) DecideHost(q Request) Decision {
	// A host as a URL spells it (a trailing dot, upper case, letters IDNA
	// maps) is decided as the name a connection to it reaches.
	if n, err := netrule.NormalizeHost(q.Host); err == nil {
		q.Host = n
	}
	var found *hostRule
	rc := readingCache{}
	for _, h := range rs.hosts {
		if (found == nil || h.kind.rank() > found.kind.rank()) && h.match(q, rc) {
			found = h
		}
	}
	if found == nil {
		return Decision{Verdict: Allow}
	}
	reason := found.r.Reason
	if reason == "" {
		reason = "rule " + found.ref.String()
	}
	ref := found.ref
	return Decision{Verdict: found.kind, Rule: &ref, Reason: reason}
}

// HasHostRules reports whether the policy has host rules for DecideHost.
func (rs *Rules) HasHostRules() bool { return len(rs.hosts) > 0 }
