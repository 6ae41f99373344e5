package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"
)

// Fetch's defaults.
const (
	DefaultFetchTimeout  = 5 * time.Second
	DefaultFetchMaxBytes = 1 << 20
)

// Fetcher makes the one kind of request agent platforms let a sandboxed
// agent make beside its network, a webhook-style fetch: a GET of a public
// HTTPS URL, with no redirect followed, bounded in time and size, to an
// address the proxy's SSRF checks pass (CheckAddr). Everything else is
// refused with the reason (a *FetchError).
type Fetcher struct {
	// AllowCIDRs are ranges that may be fetched although private, as
	// [network] allow_cidrs (tests point names at loopback with it).
	AllowCIDRs []string
	// Resolver and Dial are as for Proxy; nil means the system's.
	Resolver func(ctx context.Context, host string) ([]netip.Addr, error)
	Dial     func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// TLS is the client configuration; nil means the system's roots.
	TLS *tls.Config
	// Timeout bounds the whole fetch; default DefaultFetchTimeout.
	Timeout time.Duration
	// MaxBytes bounds the body; default DefaultFetchMaxBytes. A longer
	// one is refused, not cut.
	MaxBytes int64
	// Scrub, when set, is applied to every string the server chose that a
	// refusal quotes (its status text, a redirect's Location, a read or
	// TLS error, which may quote a header line or a certificate's name)
	// before it is quoted: a daemon puts its session's secrets'
	// placeholders in place of their values with it, since a server the
	// session sent one to could echo it back there.
	Scrub func(string) string
}

// FetchResult is a fetched response: its status, headers and body, and
// the address it came from.
type FetchResult struct {
	Status int
	Header http.Header
	Body   []byte
	Addr   string
}

// FetchError is a fetch refused, or failed, with the reason.
type FetchError struct{ Reason string }

func (e *FetchError) Error() string { return "fetch refused: " + e.Reason }

// Fetch GETs rawURL.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (*FetchResult, error) {
	refuse := func(format string, a ...any) (*FetchResult, error) {
		return nil, &FetchError{Reason: fmt.Sprintf(format, a...)}
	}
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return refuse("%q is not a URL: %v", rawURL, err)
	case u.Scheme != "https":
		return refuse("only https:// URLs are fetched, not %q", u.Scheme+"://")
	case u.User != nil:
		return refuse("a URL with credentials in it is not fetched")
	case u.Hostname() == "":
		return refuse("%q names no host", rawURL)
	}
	if _, ok := ParseIPLiteral(u.Hostname()); ok {
		return refuse("%s is an address: fetch a name, whose certificate says who answers", u.Hostname())
	}
	port := 443
	if ps := u.Port(); ps != "" {
		if port, err = strconv.Atoi(ps); err != nil {
			return refuse("bad port %q", ps)
		}
	}
	name, err := normalizeHost(u.Hostname())
	if err != nil {
		return refuse("%q is not a valid host name: %v", u.Hostname(), err)
	}
	// The proxy's own path from a name to a checked connection: a rule
	// set that allows this host, and every address it resolves to held
	// to CheckAddr.
	rules, err := ParseRules([]string{name}, nil, f.AllowCIDRs)
	if err != nil {
		return refuse("%v", err)
	}
	p := &Proxy{Rules: rules, Resolver: f.Resolver, Dial: f.Dial, DialTimeout: f.timeout()}
	p.init()
	defer p.Close()
	ctx, cancel := context.WithTimeout(ctx, f.timeout())
	defer cancel()
	var ev Event
	t, v := p.decide(Dest{Host: name, Port: port}, &ev)
	if !v.Allow {
		return refuse("%s", v.Reason)
	}
	conn, addr, err := p.connect(ctx, t)
	var refused *errRefused
	switch {
	case errors.As(err, &refused):
		return refuse("%s", refused.v.Reason)
	case err != nil:
		return refuse("connect to %s:%d: %v", name, port, err)
	}
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	cfg := &tls.Config{}
	if f.TLS != nil {
		cfg = f.TLS.Clone()
	}
	cfg.ServerName = name
	tc := tls.Client(conn, cfg)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return refuse("%v", err)
	}
	req.Header.Set("User-Agent", "moat-fetch")
	if err := req.Write(tc); err != nil {
		return refuse("%s (%s)", f.scrub(why(ctx, err)), addr)
	}
	// http.ReadResponse holds a header of any length in memory: read
	// through a bound, so a server that never ends its header is
	// refused rather than buffered until the time limit.
	cr := &capReader{r: tc, left: maxResponseHeader}
	resp, err := http.ReadResponse(bufio.NewReader(cr), req)
	if errors.Is(err, errCapped) {
		return refuse("the response's header is larger than %d bytes (%s)", maxResponseHeader, addr)
	}
	if err != nil {
		return refuse("%s (%s)", f.scrub(why(ctx, err)), addr)
	}
	// The body is bounded below as it is decoded; the bound on the raw
	// stream only stops a server sending more than a body that size
	// could take (chunk framing included, which Go's reader bounds).
	cr.left += 17*f.maxBytes() + 64<<10
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return refuse("%s answered %s, a redirect to %q: redirects are not followed (fetch that URL if it is the one meant)", name, f.scrub(resp.Status), f.scrub(resp.Header.Get("Location")))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.maxBytes()+1))
	if errors.Is(err, errCapped) {
		return refuse("the response is larger than %d bytes", f.maxBytes())
	}
	if err != nil {
		return refuse("%s (%s)", f.scrub(why(ctx, err)), addr)
	}
	if int64(len(body)) > f.maxBytes() {
		return refuse("the response is larger than %d bytes", f.maxBytes())
	}
	return &FetchResult{Status: resp.StatusCode, Header: resp.Header, Body: body, Addr: addr.String()}, nil
}

// maxResponseHeader bounds a response's status line and header, read by
// the proxy from a destination and by a fetch, as net/http's server
// bounds a request's by default.
const maxResponseHeader = 1 << 20

var errCapped = errors.New("read bound reached")

// capReader reads from r until left bytes have been read, then fails
// with errCapped: unlike io.LimitReader's end of file, which a body read
// until the connection closes would take for its end. A negative left is
// no bound.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return c.r.Read(p)
	}
	if c.left == 0 {
		return 0, errCapped
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func why(ctx context.Context, err error) string {
	if ctx.Err() != nil || isTimeout(err) {
		return "no complete answer within the fetch's time limit"
	}
	return err.Error()
}

func (f *Fetcher) scrub(v string) string {
	if f.Scrub == nil {
		return v
	}
	return f.Scrub(v)
}

func (f *Fetcher) timeout() time.Duration { return orDefault(f.Timeout, DefaultFetchTimeout) }

func (f *Fetcher) maxBytes() int64 {
	if f.MaxBytes > 0 {
		return f.MaxBytes
	}
	return DefaultFetchMaxBytes
}
