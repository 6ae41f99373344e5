package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The HTTP side uses net/http's request and response parsers and writers
// (ReadRequest, ReadResponse, Request.Write, Response.Write), which are
// fuzzed and hardened upstream; only the proxying around them is moat's.

// upstream is the kept-alive connection of one client connection to the
// destination of its last forwarded request.
type upstream struct {
	conn net.Conn
	cr   *capReader // under br: bounds a response's header as it is read
	br   *bufio.Reader
	bw   *bufio.Writer
	host string
	port int
	addr netip.AddrPort
}

// reader makes the buffered reader of u.conn, over a bound that is on
// only while a response's header is read.
func (u *upstream) reader() {
	u.cr = &capReader{r: u.conn, left: -1}
	u.br = bufio.NewReader(u.cr)
}

func (u *upstream) close(p *Proxy) {
	if u != nil {
		p.untrack(u.conn)
	}
}

func (cc *clientConn) serveHTTP() {
	p := cc.p
	var up *upstream
	defer func() { up.close(p) }()
	for first := true; ; first = false {
		if !first {
			cc.c.SetReadDeadline(time.Now().Add(p.idleTimeout()))
			if _, err := cc.br.Peek(1); err != nil {
				return
			}
			cc.start = time.Now()
		}
		cc.c.SetReadDeadline(time.Now().Add(p.headerTimeout()))
		cc.lr.N = p.maxHeaderBytes()
		req, hosts, err := cc.readRequest()
		if err != nil {
			cc.badRequest(err, Event{Time: cc.start, Proto: ProtoHTTP})
			return
		}
		cc.c.SetReadDeadline(time.Time{})
		cc.lr.N = 1<<63 - 1
		if req.Method == http.MethodConnect {
			cc.serveConnect(req, hosts)
			return
		}
		if !cc.forward(req, hosts, &up) {
			return
		}
	}
}

// readRequest reads one request with net/http's parser, and the values
// of its Host headers, which http.ReadRequest drops: the header block is
// kept as it is read and parsed again with the same parser (textproto),
// so the two readings cannot disagree.
func (cc *clientConn) readRequest() (*http.Request, []string, error) {
	ahead, _ := cc.br.Peek(cc.br.Buffered())
	cc.rec.buf = append(cc.rec.buf[:0], ahead...)
	cc.rec.on = true
	req, err := http.ReadRequest(cc.br)
	cc.rec.on = false
	if err != nil {
		return nil, nil, err
	}
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(cc.rec.buf)))
	if _, err := tp.ReadLine(); err != nil {
		return nil, nil, err
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, nil, err
	}
	if len(h.Values("Transfer-Encoding")) > 0 && len(h.Values("Content-Length")) > 0 {
		// Ambiguous framing, the stuff of request smuggling (RFC 9112 6.3).
		return nil, nil, errors.New("both Transfer-Encoding and Content-Length")
	}
	return req, h.Values("Host"), nil
}

// recorder passes reads through and, while on, keeps a copy.
type recorder struct {
	r   io.Reader
	on  bool
	buf []byte
}

func (r *recorder) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if r.on {
		r.buf = append(r.buf, b[:n]...)
	}
	return n, err
}

// badRequest answers a request that could not be read: 431 when the header
// block was too large, 408 when it was too slow, 400 otherwise. ev is the
// attempt's event as far as it is known (inside an intercepted tunnel,
// its host).
func (cc *clientConn) badRequest(err error, ev Event) {
	ev.Decision = DecisionError
	switch {
	case cc.lr.N <= 0:
		ev.Rule = "header too large"
		ev.Reason = fmt.Sprintf("request headers larger than %d bytes", cc.p.maxHeaderBytes())
		writeStatus(cc.c, http.StatusRequestHeaderFieldsTooLarge, "", "moat: "+ev.Reason+"\n")
	case isTimeout(err):
		ev.Rule = "header timeout"
		ev.Reason = fmt.Sprintf("request headers not received within %v", cc.p.headerTimeout())
		writeStatus(cc.c, http.StatusRequestTimeout, "", "moat: "+ev.Reason+"\n")
	default:
		ev.Rule = "bad request"
		ev.Reason = "malformed HTTP request: " + err.Error()
		writeStatus(cc.c, http.StatusBadRequest, "", "moat: "+ev.Reason+"\n")
	}
	cc.p.emit(ev)
}

func (cc *clientConn) serveConnect(req *http.Request, hosts []string) {
	p := cc.p
	ev := &Event{Time: cc.start, Proto: ProtoConnect}
	defer cc.finish(ev)
	host, portStr, err := net.SplitHostPort(req.RequestURI)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || strings.HasPrefix(req.RequestURI, "/") {
		ev.Decision, ev.Rule = DecisionError, "bad request"
		ev.Reason = fmt.Sprintf("CONNECT needs host:port, not %q", req.RequestURI)
		writeStatus(cc.c, http.StatusBadRequest, "", "moat: "+ev.Reason+"\n")
		return
	}
	t, v := p.decide(Dest{Host: host, Port: port}, ev)
	if !v.Allow {
		cc.refuse(ev, "CONNECT "+req.RequestURI)
		return
	}
	if cc.refuseHostHeader(ev, hosts, host, port, 80, "CONNECT "+req.RequestURI) {
		return
	}
	if !p.check(Query{Host: ev.Host, Port: port}, ev) {
		cc.refuse(ev, "CONNECT "+req.RequestURI)
		return
	}
	up, addr, err := p.connect(context.Background(), t)
	if err != nil {
		cc.connectFailed(ev, err, "CONNECT "+req.RequestURI)
		return
	}
	ev.Decision, ev.Addr = DecisionAllow, addr.String()
	cc.c.SetWriteDeadline(time.Now().Add(p.headerTimeout()))
	_, err = io.WriteString(cc.c, "HTTP/1.1 200 Connection established\r\n\r\n")
	cc.c.SetWriteDeadline(time.Time{})
	if err != nil {
		p.untrack(up)
		ev.Decision, ev.Reason = DecisionError, "write reply: "+err.Error()
		return
	}
	cc.tunnel(up, t, ev)
}

// refuse answers a denied request with 403, naming the rule in the
// X-Moat-Denied header and explaining in the body how to allow it.
func (cc *clientConn) refuse(ev *Event, what string) {
	ev.Decision = DecisionDeny
	cc.tell(ev)
	writeStatus(cc.c, http.StatusForbidden, ev.Rule,
		fmt.Sprintf("moat: refused %s\nrule: %s\n%s\n", what, ev.Rule, ev.Reason))
}

// refuseHostHeader refuses a request, forwarded or CONNECT, whose Host
// header names another host or port than the target the rules decided
// on (host, port), and reports whether it did; a Host header without a
// port names defPort, the default of the request's scheme. A request
// without a Host header passes (HTTP/1.0 clients, and some CONNECT
// clients, send none).
// Both kinds of request go through this one check, so that neither path
// accepts a request whose headers disagree about where it goes: nothing
// that reads the Host header (a log, credential injection keyed on the
// host) can be told one host while the bytes go to another.
func (cc *clientConn) refuseHostHeader(ev *Event, hosts []string, host string, port, defPort int, what string) bool {
	if len(hosts) == 0 || len(hosts) == 1 && sameAuthority(hosts[0], host, port, defPort) {
		return false
	}
	ev.Rule = "host header mismatch"
	ev.Reason = fmt.Sprintf("the Host header %q does not name the request's target %s:%d", strings.Join(hosts, ", "), ev.Host, port)
	cc.refuse(ev, what)
	return true
}

// connectFailed answers a destination that could not be reached: 403 when
// every address was refused, 502 (or 504 on a timeout) otherwise.
func (cc *clientConn) connectFailed(ev *Event, err error, what string) {
	var refused *errRefused
	if errors.As(err, &refused) {
		ev.Rule, ev.Reason = refused.v.Rule, refused.v.Reason
		cc.refuse(ev, what)
		return
	}
	ev.Decision, ev.Reason = DecisionError, err.Error()
	cc.tell(ev)
	status := http.StatusBadGateway
	if isTimeout(err) || errors.Is(err, context.DeadlineExceeded) {
		status = http.StatusGatewayTimeout
	}
	writeStatus(cc.c, status, "", fmt.Sprintf("moat: %s: %v\n", what, err))
}

// hopHeaders are meaningful for one connection only (RFC 9110 7.6.1), and
// are not passed on in either direction; neither is anything named in a
// Connection header.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// forward serves one absolute-URI request and reports whether the client
// connection can carry another.
func (cc *clientConn) forward(req *http.Request, hosts []string, upp **upstream) bool {
	p := cc.p
	ev := &Event{Time: cc.start, Proto: ProtoHTTP}
	defer cc.finish(ev)
	what := req.Method + " " + req.RequestURI

	u := req.URL
	if u.Scheme == "" || u.Host == "" {
		ev.Decision, ev.Rule = DecisionError, "bad request"
		ev.Reason = "this is moat's egress proxy: requests need an absolute URL (http://host/path) or CONNECT"
		writeStatus(cc.c, http.StatusBadRequest, "", "moat: "+ev.Reason+"\n")
		return false
	}
	if !strings.EqualFold(u.Scheme, "http") {
		ev.Decision, ev.Rule = DecisionError, "bad request"
		ev.Reason = fmt.Sprintf("the proxy forwards http:// URLs only, not %s://; %s:// clients use CONNECT", u.Scheme, u.Scheme)
		writeStatus(cc.c, http.StatusBadRequest, "", "moat: "+ev.Reason+"\n")
		return false
	}
	port := 80
	if ps := u.Port(); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil {
			ev.Decision, ev.Rule = DecisionError, "bad request"
			ev.Reason = fmt.Sprintf("bad port in %q", req.RequestURI)
			writeStatus(cc.c, http.StatusBadRequest, "", "moat: "+ev.Reason+"\n")
			return false
		}
		port = n
	}
	if rule, reason := p.Secrets.checkPlain(req); rule != "" {
		ev.Host, ev.Port, ev.Rule, ev.Reason = u.Hostname(), port, rule, reason
		cc.refuse(ev, what)
		return false
	}
	t, v := p.decide(Dest{Host: u.Hostname(), Port: port}, ev)
	if !v.Allow {
		cc.refuse(ev, what)
		return false
	}
	if p.HTTPSOnly {
		ev.Rule = "https_only"
		ev.Reason = fmt.Sprintf("plain HTTP is refused by [network] https_only; use https://%s/", u.Host)
		cc.refuse(ev, what)
		return false
	}
	if cc.refuseHostHeader(ev, hosts, u.Hostname(), port, 80, what) {
		return false
	}
	if !p.check(Query{Host: ev.Host, Port: port, Method: req.Method, Path: u.EscapedPath(), MethodOverrides: methodOverrides(req.Header), PathOverrides: pathOverrides(req.Header)}, ev) {
		cc.refuse(ev, what)
		return false
	}

	up := *upp
	reused := up != nil && up.host == t.name && up.port == port && t.name != "" ||
		up != nil && up.host == "" && t.ip.IsValid() && up.addr.Addr() == t.ip && up.port == port
	if !reused {
		up.close(p)
		*upp = nil
		conn, addr, err := p.connect(context.Background(), t)
		if err != nil {
			cc.connectFailed(ev, err, what)
			return false
		}
		up = &upstream{conn: conn, bw: bufio.NewWriter(conn), host: t.name, port: port, addr: addr}
		up.reader()
		*upp = up
	}
	ev.Decision, ev.Addr = DecisionAllow, up.addr.String()

	// The request as the destination gets it: origin-form target,
	// no hop-by-hop headers, no proxy credentials, no user info.
	clientClose := req.Close
	removeHopHeaders(req.Header)
	req.Header.Del("Host")
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // else Request.Write adds Go's
	}
	req.Host = u.Host
	req.URL.User = nil
	req.Close = false
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		req.Header.Del("Expect")
		io.WriteString(cc.c, "HTTP/1.1 100 Continue\r\n\r\n")
	}
	emptyBody := req.ContentLength == 0 && len(req.TransferEncoding) == 0
	trailers := checkTrailers(req, up.conn, func(tr http.Header) ([]string, string, string) {
		if rule, reason := forbiddenTrailer(tr); rule != "" {
			return nil, rule, reason
		}
		return p.Secrets.plainTrailers(tr)
	})

	resp, upBytes, writeDone, err := roundTrip(up, req)
	if err != nil && reused && emptyBody && resp == nil {
		// The kept-alive connection was closed by the other side while
		// idle: try once more on a new connection to the same address.
		p.untrack(up.conn)
		conn, derr := p.dial(context.Background(), up.addr)
		if derr == nil && p.track(conn) {
			up.conn, up.bw = conn, bufio.NewWriter(conn)
			up.reader()
			resp, upBytes, writeDone, err = roundTrip(up, req)
		}
	}
	if err != nil && trailers != nil && trailers.rule != "" {
		*upp = nil
		up.close(p)
		ev.Rule, ev.Reason = trailers.rule, trailers.reason
		cc.refuse(ev, what)
		return false
	}
	if bad, ok := errors.AsType[*badBodyError](err); ok {
		*upp = nil
		up.close(p)
		ev.Decision, ev.Rule, ev.Reason = DecisionError, "bad request", bad.Error()
		writeStatus(cc.c, http.StatusBadRequest, "", fmt.Sprintf("moat: %s: %v\n", what, bad))
		return false
	}
	if err != nil {
		*upp = nil
		up.close(p)
		if p.isClosed() {
			// Allowed and sent: the run ended, and Close cut it off.
			ev.Decision, ev.Reason = DecisionAllow, cutAtEnd
			return false
		}
		ev.Decision, ev.Rule, ev.Reason = DecisionError, "upstream", err.Error()
		writeStatus(cc.c, http.StatusBadGateway, "", fmt.Sprintf("moat: %s: %v\n", what, err))
		return false
	}

	removeHopHeaders(resp.Header)
	upClose := resp.Close
	keep := !clientClose && !resp.Close
	if !req.ProtoAtLeast(1, 1) {
		resp.TransferEncoding = nil // an HTTP/1.0 client gets a body delimited by close
		keep = false
	}
	resp.Close = !keep
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	werr, reqErr := cc.relay(resp, up, upBytes, writeDone, emptyBody, ev)
	if werr != nil || reqErr != nil || upClose {
		*upp = nil
		up.close(p)
	}
	if trailers != nil && trailers.rule != "" {
		// Refused after the destination answered: see trailerCheck.
		ev.Decision, ev.Rule, ev.Reason = DecisionDeny, trailers.rule, trailers.reason
		return false
	}
	return keep && werr == nil && reqErr == nil
}

// relay writes the destination's response to the client and waits for
// the request's body to have been sent, filling in the event's byte
// counts. The request body must be fully sent before either connection
// can carry another request; if the destination answered without reading
// it, the upstream connection is closed and reqErr says so.
func (cc *clientConn) relay(resp *http.Response, up *upstream, upBytes *countWriter, writeDone <-chan error, emptyBody bool, ev *Event) (werr, reqErr error) {
	cw := &countWriter{w: cc.c}
	bw := responseWriters.Get().(*bufio.Writer)
	bw.Reset(cw)
	var out io.Writer = bw
	if resp.Body != nil && resp.Body != http.NoBody {
		ub := &upstreamBody{ReadCloser: resp.Body, conn: up.conn}
		if streaming(resp) {
			// What the destination sent reaches the client before the
			// proxy waits for more: an event stream, a long poll or a
			// token-by-token answer must not wait for the buffer to fill.
			ub.flush = bw
			// Not bw itself: a body copied whole (not chunked) goes by
			// bw's ReadFrom, which reads into bw's buffer, and the flush
			// in the middle of that read sent the buffer's old bytes,
			// the response's header, in the body's place (found by a
			// tester).
			out = struct{ io.Writer }{bw}
		}
		resp.Body = ub
	}
	werr = resp.Write(out)
	if werr == nil {
		werr = bw.Flush()
	}
	bw.Reset(nil)
	responseWriters.Put(bw)
	resp.Body.Close()
	ev.BytesDown = cw.n
	if emptyBody {
		reqErr = <-writeDone
	} else {
		wait := time.NewTimer(100 * time.Millisecond)
		select {
		case reqErr = <-writeDone:
		case <-wait.C:
			up.conn.Close()
			if reqErr = <-writeDone; reqErr == nil {
				reqErr = errors.New("request body not read")
			}
		}
		wait.Stop()
	}
	ev.BytesUp = upBytes.n
	return werr, reqErr
}

// upstreamBody is a response body that, closed before its end (the
// client went away mid-download), closes the upstream connection first:
// closing a body read by http.ReadResponse otherwise reads the rest of
// it, which for a large download goes on long after nobody wants it.
type upstreamBody struct {
	io.ReadCloser
	conn  net.Conn
	end   bool
	flush *bufio.Writer // flushed before each read, for a streaming response
}

// streaming reports whether a response's body may come in pieces over
// time, as net/http/httputil's ReverseProxy reads it: no length given,
// or an event stream.
func streaming(resp *http.Response) bool {
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	return resp.ContentLength < 0 || strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	if b.flush != nil && b.flush.Buffered() > 0 {
		if err := b.flush.Flush(); err != nil {
			return 0, err
		}
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.end = true
	}
	return n, err
}

func (b *upstreamBody) Close() error {
	if !b.end {
		b.conn.Close()
	}
	return b.ReadCloser.Close()
}

// responseWriters buffer responses to clients: large enough that a big
// body moves in few system calls (its bytes pass through this buffer,
// unlike a tunnel's).
var responseWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 256<<10) }}

// maxInterim bounds the 1xx responses the proxy reads before a final one,
// as net/http's client does: each is dropped, and a destination sending
// them without end would hold the proxy in this loop.
const maxInterim = 5

// roundTrip writes req to up (on its own goroutine, so that a destination
// that answers before reading the whole body does not deadlock) and reads
// the final response; 1xx interim responses are dropped.
func roundTrip(up *upstream, req *http.Request) (*http.Response, *countWriter, <-chan error, error) {
	cw := &countWriter{w: up.conn}
	up.bw.Reset(cw)
	var cut *cutBody
	if req.Body != nil && req.Body != http.NoBody {
		cut = &cutBody{ReadCloser: req.Body, conn: up.conn}
		req.Body = cut
	}
	done := make(chan error, 1)
	go func() {
		err := req.Write(up.bw)
		if err == nil {
			err = up.bw.Flush()
		}
		done <- err
	}()
	for interim := 0; ; interim++ {
		if interim > maxInterim {
			up.conn.Close()
			<-done
			return nil, cw, done, fmt.Errorf("the destination sent more than %d interim (1xx) responses", maxInterim)
		}
		// http.ReadResponse holds a header of any length in memory: a
		// destination that never ends its header would otherwise grow
		// moat's memory until it died, outside any sandbox's limit.
		up.cr.left = maxResponseHeader
		resp, err := http.ReadResponse(up.br, req)
		up.cr.left = -1
		if errors.Is(err, errCapped) {
			err = fmt.Errorf("the response's header is larger than %d bytes", maxResponseHeader)
		}
		if err != nil {
			up.conn.Close()
			<-done
			if cut != nil && cut.err != nil {
				return nil, cw, done, &badBodyError{cut.err}
			}
			return nil, cw, done, err
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			up.conn.Close()
			<-done
			return nil, cw, done, errors.New("the destination switched protocols, which the proxy does not relay")
		}
		if resp.StatusCode >= 200 {
			return resp, cw, done, nil
		}
	}
}

// cutBody is a request body that, when reading it fails (a malformed
// chunk or trailer, a client gone mid-body), closes the connection to
// the destination: the destination would wait for the rest of a body that
// never comes, and the proxy for its answer. err is the failure; it is
// read once the request's write is over.
type cutBody struct {
	io.ReadCloser
	conn net.Conn
	err  error
}

func (b *cutBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && !errors.Is(err, errTrailerRefused) {
		b.err = err
		b.conn.Close()
	}
	return n, err
}

// badBodyError is a request whose body could not be read.
type badBodyError struct{ err error }

func (e *badBodyError) Error() string {
	return "the request's body could not be read: " + e.err.Error()
}

// sameAuthority reports whether a Host header names host:port. A header
// without a port means defPort, the default port of the request's scheme
// (RFC 9110 7.2): 80 for an http:// URL, and for CONNECT, the reading of
// RFC 9110's own example ("CONNECT server.example.com:80" with "Host:
// server.example.com"); 443 for a request inside an intercepted TLS
// tunnel, an https:// request, for which clients (curl, Python, Go) leave
// the port out.
func sameAuthority(header, host string, port, defPort int) bool {
	h, ps, err := net.SplitHostPort(header)
	if err != nil {
		h, ps = strings.TrimSuffix(strings.TrimPrefix(header, "["), "]"), strconv.Itoa(defPort)
	}
	n, err := strconv.Atoi(ps)
	if err != nil || n != port {
		return false
	}
	return hostKey(h) == hostKey(host)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// writeStatus writes a complete plain-text response and asks the client to
// close the connection. denied, when set, is the X-Moat-Denied header.
func writeStatus(w io.Writer, status int, denied, body string) {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	if denied != "" {
		fmt.Fprintf(&b, "X-Moat-Denied: %s\r\n", headerSafe(denied))
	}
	fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	if c, ok := w.(net.Conn); ok {
		c.SetWriteDeadline(time.Now().Add(time.Second))
	}
	io.WriteString(w, b.String())
}

// headerSafe keeps printable ASCII only, so a value cannot split a header.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}
