package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults of the Proxy's limits, used when a field is zero.
const (
	DefaultMaxHeaderBytes = 64 << 10
	DefaultHeaderTimeout  = 10 * time.Second
	DefaultIdleTimeout    = 90 * time.Second
	DefaultDialTimeout    = 10 * time.Second
	DefaultMaxConns       = 256
)

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("egress: proxy closed")

// Proxy is the egress proxy: an HTTP/1.1 forward proxy (absolute-URI
// requests and CONNECT) and a SOCKS5 proxy (CONNECT) on the same listener,
// told apart by the client's first byte. Every destination is decided by
// Rules.Decide; every address a name resolves to is checked with
// Rules.CheckAddr, and the proxy connects only to an address it checked.
//
// Set the fields, then call Serve (once per listener, possibly several
// listeners at once); the fields must not change after that, and a Proxy
// must not be copied after first use. Close ends every listener and
// connection.
type Proxy struct {
	// Rules decides every destination. It must be set.
	Rules *Rules

	// InSandbox are addresses that stand for moat inside the sandbox
	// (its TUN device's, its resolver's): no host anywhere, so never
	// dialled on the host's network, whatever allow_cidrs says.
	InSandbox []netip.Addr

	// RunID is copied into every Event.
	RunID string

	// Resolver returns the addresses of a host name (lower-case ASCII, no
	// trailing dot). Nil means net.DefaultResolver. Tests use it to point
	// names at servers on loopback.
	Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

	// Dial opens a TCP connection to exactly addr. Nil means a
	// net.Dialer. The connection should be a *net.TCPConn so that
	// relaying uses splice(2).
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)

	// HostAddrs returns the host's own addresses, which CheckAddr
	// refuses unless allow_cidrs lists them. Nil means the addresses on
	// the host's interfaces (net.InterfaceAddrs), read at the first
	// connection and again when the last reading is more than a second
	// old. Tests use it to stand in for the host's interfaces.
	HostAddrs func() ([]netip.Addr, error)

	// Audit, if set, receives one Event per connection attempt (per
	// request for forwarded plain HTTP), from many goroutines at once. It
	// should not block for long: it runs on the connection's goroutine.
	Audit func(Event)

	// Check, if set, is asked about every destination the Rules allow,
	// before anything connects to it: the harness's rules about hosts.
	// Method and Path are set for a forwarded plain-HTTP request and empty
	// for a tunnel (CONNECT, SOCKS5), whose requests the proxy cannot
	// see. It may block (to ask a person) until ctx ends, which Close
	// ends. A refusal is answered like any other: 403 naming v.Rule.
	Check func(ctx context.Context, q Query) Verdict

	// HTTPSOnly refuses plain-HTTP forwarding and any tunnel whose first
	// bytes are not a TLS ClientHello; nothing the destination sends
	// reaches the client before that ClientHello.
	HTTPSOnly bool

	// Secrets, if set, are the credentials the proxy adds to requests to
	// their hosts, whose TLS it then intercepts (see Secret).
	Secrets *Secrets

	MaxHeaderBytes int           // request header block (HTTP) or handshake (SOCKS5); default 64 KiB
	HeaderTimeout  time.Duration // to read a request's headers or a SOCKS5 handshake, and a ClientHello on port 443 or with HTTPSOnly; default 10 s
	IdleTimeout    time.Duration // between forwarded requests on a kept-alive connection; default 90 s
	DialTimeout    time.Duration // to resolve and connect to a destination; default 10 s
	MaxConns       int           // client connections served at once; more are refused at once; default 256

	initOnce  sync.Once
	sem       chan struct{} // one slot per connection being served
	refusing  chan struct{} // bounds the goroutines that refuse surplus connections
	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	tuns      map[stopper]struct{}
	served    sync.WaitGroup // the goroutines that serve a connection, and emit its event
	own       hostAddrs
	ctx       context.Context // ended by Close: a Check waiting ends with it
	cancel    context.CancelFunc
}

// Query is a destination the Rules allowed, for Proxy.Check: Host is the
// normalised name or the address, Method and Path those of a forwarded
// request ("" in a tunnel).
type Query struct {
	Host   string
	Port   int
	Method string
	Path   string
	// MethodOverrides are the values of a plain-HTTP request's
	// method-override headers (MethodOverrides), which a server may read
	// as its method; PathOverrides those of its path-override headers.
	MethodOverrides []string
	PathOverrides   []string
	// Intercepted says that the connection's TLS is terminated for a
	// secret's host, so each request read inside it is asked about in
	// turn, with its method and path: at the connection (no Method) the
	// rules narrowed by those wait for its requests; at a request read
	// inside it, the rules not narrowed by them were decided with the
	// connection.
	Intercepted bool
}

// MethodOverrides are the headers with which many frameworks (Rails,
// Laravel, Express's method-override, ASP.NET, Google's APIs) let a
// request name another method than its own.
var MethodOverrides = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// PathOverrides are the headers with which some servers and front ends
// (IIS's URL Rewrite, Symfony's and Zend's older request objects, some
// gateways) let a request name another path than its own.
var PathOverrides = []string{"X-Original-Url", "X-Rewrite-Url", "X-Original-Uri", "X-Override-Url"}

// pathOverrides returns the values h gives the PathOverrides headers.
func pathOverrides(h http.Header) []string {
	var out []string
	for _, name := range PathOverrides {
		out = append(out, headerValues(h, name)...)
	}
	return out
}

// headerValues returns the values h gives the header name, in any case
// and spelt with "_" for "-" as well: a CGI gateway (PHP's included)
// reads X_Original_URL as the HTTP_X_ORIGINAL_URL that X-Original-URL
// is, and net/http keeps the two apart.
func headerValues(h http.Header, name string) []string {
	out := h.Values(name)
	for k, vs := range h {
		if strings.ContainsRune(k, '_') && strings.EqualFold(strings.ReplaceAll(k, "_", "-"), name) {
			out = append(out, vs...)
		}
	}
	return out
}

// methodOverrides returns the values h gives the MethodOverrides headers,
// each item of a comma-separated list on its own: servers differ in which
// of several they take (Express's method-override, the last).
func methodOverrides(h http.Header) []string {
	var out []string
	for _, name := range MethodOverrides {
		for _, v := range headerValues(h, name) {
			for _, item := range strings.Split(v, ",") {
				out = append(out, strings.TrimSpace(item))
			}
		}
	}
	return out
}

// check asks p.Check about a destination decide allowed, and fills in the
// event when it refuses. A connection (no method) to a host whose TLS the
// proxy terminates is asked about as Intercepted.
func (p *Proxy) check(q Query, ev *Event) bool {
	if p.Check == nil {
		return true
	}
	if q.Method == "" {
		q.Intercepted = p.Secrets.intercepts(q.Host, q.Port)
	}
	v := p.Check(p.ctx, q)
	if !v.Allow {
		ev.Rule, ev.Reason = v.Rule, v.Reason
	}
	return v.Allow
}

func (p *Proxy) init() {
	p.initOnce.Do(func() {
		p.sem = make(chan struct{}, p.maxConns())
		p.refusing = make(chan struct{}, 16)
		p.listeners = map[net.Listener]struct{}{}
		p.conns = map[net.Conn]struct{}{}
		p.ctx, p.cancel = context.WithCancel(context.Background())
	})
}

func (p *Proxy) maxHeaderBytes() int64 {
	if p.MaxHeaderBytes > 0 {
		return int64(p.MaxHeaderBytes)
	}
	return DefaultMaxHeaderBytes
}

func (p *Proxy) headerTimeout() time.Duration {
	return orDefault(p.HeaderTimeout, DefaultHeaderTimeout)
}
func (p *Proxy) idleTimeout() time.Duration { return orDefault(p.IdleTimeout, DefaultIdleTimeout) }
func (p *Proxy) dialTimeout() time.Duration { return orDefault(p.DialTimeout, DefaultDialTimeout) }

func (p *Proxy) maxConns() int {
	if p.MaxConns > 0 {
		return p.MaxConns
	}
	return DefaultMaxConns
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Serve accepts connections on l and serves each on its own goroutine
// until l fails or Close is called; it then returns ErrClosed (after
// Close) or the accept error. Serve closes l when it returns. Any stream
// listener works: the sandbox's unix socket, or TCP in tests.
func (p *Proxy) Serve(l net.Listener) error {
	p.init()
	if p.Rules == nil {
		l.Close()
		return errors.New("egress: Proxy.Rules is nil")
	}
	if !p.trackListener(l, true) {
		l.Close()
		return ErrClosed
	}
	defer p.trackListener(l, false)
	defer l.Close()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if p.isClosed() {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		select {
		case p.sem <- struct{}{}:
			if !p.spawn(p.sem, c, p.serveConn) {
				return ErrClosed
			}
		default:
			select {
			case p.refusing <- struct{}{}:
				if !p.spawn(p.refusing, c, p.refuseBusy) {
					return ErrClosed
				}
			default:
				c.Close()
			}
		}
	}
}

// Close stops every Serve and closes every connection, client and
// upstream, then waits, up to closeWait, for the goroutines that served
// them to emit their events: a connection still open when a run ends
// (a tunnel a background process holds, a dial under way) is in the
// run's report and audit stream like any other. It is safe to call
// more than once.
func (p *Proxy) Close() error {
	p.init()
	p.mu.Lock()
	p.closed = true
	p.cancel()
	for l := range p.listeners {
		l.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	var tuns []stopper
	for ts := range p.tuns {
		tuns = append(tuns, ts)
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		for _, ts := range tuns {
			ts.stop()
		}
		p.served.Wait()
		close(done)
	}()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	return nil
}

// cutAtEnd is the reason of an allowed request whose answer had not come
// when the proxy closed: sent, not failed.
const cutAtEnd = "cut off: the run ended before the answer came"

// closeWait bounds Close's wait for connections' goroutines, which end
// as soon as their connections are closed, save a Check (an approval)
// or a hook that does not heed the proxy's context.
const closeWait = 2 * time.Second

// spawn serves c with serve on a goroutine of its own, which Close waits
// for; serve gives back the slot of slots taken for it. Once the proxy is
// closed it serves nothing: it closes c, gives the slot back and reports
// false.
func (p *Proxy) spawn(slots chan struct{}, c net.Conn, serve func(net.Conn)) bool {
	if !p.enter() {
		<-slots
		c.Close()
		return false
	}
	go func() {
		defer p.served.Done()
		serve(c)
	}()
	return true
}

// enter counts a goroutine that serves a connection, for Close to wait
// for; it reports false, counting nothing, once the proxy is closed.
func (p *Proxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.served.Add(1)
	return true
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Proxy) trackListener(l net.Listener, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.listeners, l)
		return true
	}
	if p.closed {
		return false
	}
	p.listeners[l] = struct{}{}
	return true
}

// track registers c so that Close reaches it; it reports false (and
// closes c) when the proxy is already closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) emit(e Event) {
	if p.Audit == nil {
		return
	}
	e.RunID = p.RunID
	if !e.Time.IsZero() {
		e.Duration = time.Since(e.Time)
	}
	defer func() { _ = recover() }() // a failing Audit hook must not take the connection's recovery with it
	p.Audit(e)
}

// refuseBusy answers a connection beyond MaxConns with a refusal in the
// protocol the client speaks, waiting briefly for its first byte.
func (p *Proxy) refuseBusy(c net.Conn) {
	defer func() { <-p.refusing }()
	defer c.Close()
	ev := Event{Time: time.Now(), Decision: DecisionError, Rule: "max connections",
		Reason: fmt.Sprintf("more than %d connections at once; this one was refused", p.maxConns())}
	c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		ev.Proto = ProtoHTTP
		p.emit(ev)
		return
	}
	if b[0] == socksVersion {
		ev.Proto = ProtoSOCKS5
		c.Write([]byte{socksVersion, socksNoAcceptableMethod})
	} else {
		ev.Proto = ProtoHTTP
		writeStatus(c, 503, "", "moat: "+ev.Reason+"\n")
	}
	p.emit(ev)
}

// clientConn is one client connection while it is served.
type clientConn struct {
	p     *Proxy
	c     net.Conn
	lr    io.LimitedReader // bounds what headers may take from c
	rec   recorder         // over lr: keeps a request's header bytes
	br    *bufio.Reader    // over rec
	start time.Time        // of the current attempt
	told  *Event           // the attempt's refusal, emitted already (tell)
}

var bufioReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// newClientConn starts serving c, a connection of either front end: the
// listeners' or the TUN device's. release gives back its buffer.
func (p *Proxy) newClientConn(c net.Conn) *clientConn {
	cc := &clientConn{p: p, c: c, start: time.Now()}
	cc.lr = io.LimitedReader{R: c, N: p.maxHeaderBytes()}
	cc.br = bufioReaders.Get().(*bufio.Reader)
	cc.rec.r = &cc.lr
	cc.br.Reset(&cc.rec)
	return cc
}

func (cc *clientConn) release() {
	cc.br.Reset(nil)
	bufioReaders.Put(cc.br)
}

func (p *Proxy) serveConn(c net.Conn) {
	defer func() { <-p.sem }()
	if !p.track(c) {
		return
	}
	defer p.untrack(c)
	cc := p.newClientConn(c)
	defer cc.release()
	defer func() {
		if r := recover(); r != nil {
			p.emit(Event{Time: cc.start, Proto: ProtoHTTP, Decision: DecisionError, Rule: "internal error",
				Reason: panicReason(r)})
		}
	}()

	c.SetReadDeadline(time.Now().Add(p.headerTimeout()))
	first, err := cc.br.Peek(1)
	if err != nil {
		if isTimeout(err) {
			p.emit(Event{Time: cc.start, Proto: ProtoHTTP, Decision: DecisionError, Rule: "header timeout",
				Reason: fmt.Sprintf("the client sent nothing within %v", p.headerTimeout())})
		}
		return // a connection closed before its first byte is not an attempt
	}
	if first[0] == socksVersion {
		cc.serveSOCKS()
		return
	}
	cc.serveHTTP()
}

// finish emits the event of an attempt when it ends. A panic while serving
// the attempt ends up here too: it becomes the attempt's error event, and
// the connection is closed (the attempt's function returns zero values).
// It must be deferred directly, for recover to work.
func (cc *clientConn) finish(ev *Event) {
	if r := recover(); r != nil {
		ev.Decision, ev.Rule, ev.Reason = DecisionError, "internal error", panicReason(r)
		cc.c.Close()
	}
	if cc.told != ev {
		cc.p.emit(*ev)
	}
}

// tell emits ev, a refusal or a destination that could not be reached,
// before the client learns of it (a status, an alert, a closed
// connection): a client that exits on it must find it already in the
// run's or session's record, which a caller reads as soon as the command
// ends. finish then emits nothing more.
func (cc *clientConn) tell(ev *Event) {
	if cc.told != ev {
		cc.p.emit(*ev)
		cc.told = ev
	}
}

func panicReason(r any) string {
	stack := debug.Stack()
	if len(stack) > 4096 {
		stack = stack[:4096]
	}
	return fmt.Sprintf("moat's proxy failed on this connection (a bug): %v\n%s", r, stack)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// target is a destination after Decide allowed it: the normalised name to
// resolve (empty for an IP literal) and the literal address.
type target struct {
	name string
	ip   netip.Addr
	port int
}

// decide runs Rules.Decide (and refuses a name with a placeholder in it:
// see Secrets.refuseName) and, for an allowed destination, returns what
// to resolve; the event is filled in with the normalised host.
func (p *Proxy) decide(d Dest, ev *Event) (target, Verdict) {
	v := p.Rules.Decide(d)
	if rv, bad := p.Secrets.refuseName(d.Host); bad && v.Allow {
		v = rv
	}
	t := target{port: d.Port, ip: d.IP}
	if !t.ip.IsValid() {
		t.ip, _ = ParseIPLiteral(d.Host)
	}
	if t.ip.IsValid() {
		t.ip = t.ip.Unmap()
		ev.Host = t.ip.String()
	} else if name, err := normalizeHost(d.Host); err == nil {
		t.name, ev.Host = name, name
	} else {
		ev.Host = printableHost(d.Host)
	}
	ev.Port = d.Port
	ev.Rule = v.Rule
	if !v.Allow {
		ev.Decision, ev.Reason = DecisionDeny, v.Reason
	}
	return t, v
}

// printableHost is h as an event records it: quoted, in Go's syntax with
// ASCII escapes, when it has a byte that is not printable ASCII. Such a
// host is no host name, only what a client sent (SOCKS5 and DNS names
// are any bytes); it could carry terminal control sequences, and events
// are shown to people (Summary).
func printableHost(h string) string {
	for i := 0; i < len(h); i++ {
		if h[i] <= ' ' || h[i] >= 0x7f {
			return strconv.QuoteToASCII(h)
		}
	}
	return h
}

// errRefused carries the Verdict of an address CheckAddr refused.
type errRefused struct{ v Verdict }

func (e *errRefused) Error() string { return e.v.Reason }

// connect resolves t (once), checks every address, and dials the checked
// addresses in order until one answers. It returns the connection and the
// address connected to, an *errRefused when every address was refused, or
// the resolution or dial error.
func (p *Proxy) connect(ctx context.Context, t target) (net.Conn, netip.AddrPort, error) {
	ctx, cancel := context.WithTimeout(ctx, p.dialTimeout())
	defer cancel()
	addrs := []netip.Addr{t.ip}
	if !t.ip.IsValid() {
		var err error
		if p.Resolver != nil {
			addrs, err = p.Resolver(ctx, t.name)
		} else {
			addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", t.name)
		}
		if err != nil {
			return nil, netip.AddrPort{}, fmt.Errorf("resolve %s: %w", t.name, err)
		}
		if len(addrs) == 0 {
			return nil, netip.AddrPort{}, fmt.Errorf("resolve %s: no addresses", t.name)
		}
	}
	hostOwn, local, err := p.hostAddrs()
	if err != nil {
		return nil, netip.AddrPort{}, err
	}
	if IsLocalName(t.name) {
		// A local name is allowed only when every address it has is
		// listed: which one answers must not decide where it leads.
		for _, a := range addrs {
			if v := p.Rules.CheckLocal(t.name, a); !v.Allow {
				return nil, netip.AddrPort{}, &errRefused{v}
			}
		}
	}
	var refusal *errRefused
	var lastErr error
	for _, a := range addrs {
		a = a.Unmap()
		own := withLocal(a, hostOwn, local)
		if v, ok := checkOwnListener(a, t.port, own); ok {
			if refusal == nil {
				refusal = &errRefused{v}
			}
			continue
		}
		if slices.Contains(p.InSandbox, a) {
			if refusal == nil {
				refusal = &errRefused{Verdict{Rule: "moat's address", Reason: fmt.Sprintf(
					"%s is moat's own address in the sandbox (its TUN device, its resolver), which is no host: it is never reached on the host's network", a)}}
			}
			continue
		}
		if v := p.Rules.CheckAddr(t.name, a, own); !v.Allow {
			if refusal == nil {
				refusal = &errRefused{v}
			}
			continue
		}
		ap := netip.AddrPortFrom(a, uint16(t.port))
		c, err := p.dial(ctx, ap)
		if err == nil {
			if !p.track(c) {
				return nil, ap, ErrClosed
			}
			return c, ap, nil
		}
		lastErr = err
	}
	if lastErr != nil {
		return nil, netip.AddrPort{}, lastErr
	}
	return nil, netip.AddrPort{}, refusal
}

func (p *Proxy) dial(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	if p.Dial != nil {
		return p.Dial(ctx, ap)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", ap.String())
}

// tunnel relays bytes both ways between the client and up until both
// directions end, after checking the client's first bytes: a TLS
// ClientHello must name the target host (or none), and with HTTPSOnly the
// first bytes must be one. The caller has sent the client its "connected"
// reply. It fills in the event's byte counts, SNI and any refusal.
func (cc *clientConn) tunnel(up net.Conn, t target, ev *Event) {
	p := cc.p
	if p.Secrets.intercepts(t.name, t.port) {
		cc.intercept(up, t, ev)
		return
	}
	defer p.untrack(up)
	cc.lr.N = 1<<63 - 1
	// A TLS client speaks first, so a tunnel that must carry TLS (port
	// 443, or any port with HTTPSOnly) gets HeaderTimeout for its
	// ClientHello; on other ports the client may wait for the server
	// (SMTP and SSH servers speak first).
	if t.port == 443 || p.HTTPSOnly {
		cc.c.SetReadDeadline(time.Now().Add(p.headerTimeout()))
	} else {
		cc.c.SetReadDeadline(time.Time{})
	}

	var down <-chan int64
	// With HTTPSOnly nothing from the destination reaches the client
	// until the client's first bytes have passed as a ClientHello: a
	// server that speaks first would otherwise send its plain text out
	// to a client that never sends any. A TLS server says nothing before
	// the ClientHello, so starting the relay after it costs TLS nothing.
	if !p.HTTPSOnly {
		down = relayDown(cc.c, up)
	}

	raw, hello, err := readClientHello(cc.br)
	cc.c.SetReadDeadline(time.Time{})
	refuse := func(rule, reason string) {
		ev.Decision, ev.Rule, ev.Reason = DecisionDeny, rule, reason
		cc.tell(ev)
		if hello.isTLS {
			cc.c.Write(tlsAlertAccessDenied)
		}
		cc.c.Close()
		up.Close()
	}
	host := t.name
	if host == "" {
		host = t.ip.String()
	}
	switch {
	case !hello.isTLS && p.HTTPSOnly:
		why := "did not start with a TLS ClientHello"
		switch {
		case len(raw) == 0 && isTimeout(err):
			why = fmt.Sprintf("sent nothing within %v, where a TLS client starts with its ClientHello", p.headerTimeout())
		case len(raw) == 0:
			why = "ended without sending a TLS ClientHello"
		}
		refuse("https_only", fmt.Sprintf(
			"the connection to %s:%d %s, and [network] https_only allows only TLS; nothing the server sent was relayed",
			host, t.port, why))
	case err != nil && len(raw) == 0 && errors.Is(err, io.EOF):
		// The client sent nothing and half-closed: let the other
		// direction finish (a server-speaks-first protocol).
		closeWrite(up)
	case err != nil && len(raw) == 0:
		ev.Reason = fmt.Sprintf("the client sent nothing: %v", err)
		up.Close()
	case err != nil:
		refuse("malformed tls", fmt.Sprintf("the connection to %s:%d did not start with a valid TLS ClientHello: %v", host, t.port, err))
	case hello.isTLS && hello.hasSNI && hostKey(hello.sni) != hostKey(host):
		ev.SNI = hello.sni
		refuse("sni mismatch", fmt.Sprintf(
			"the TLS server name %q differs from the CONNECT target %s (domain fronting is refused); connect to %s:%d instead",
			hello.sni, host, hello.sni, t.port))
	default:
		ev.SNI = hello.sni
		if hello.isTLS && !hello.hasSNI && t.name != "" {
			ev.Reason = "TLS without a server name (SNI)"
		} else if !hello.isTLS && t.port == 443 {
			ev.Reason = "not TLS, on port 443"
		}
		if down == nil {
			down = relayDown(cc.c, up)
		}
		ev.BytesUp = relayUp(up, raw, cc.br, cc.c)
	}
	if down != nil {
		ev.BytesDown = <-down
	}
}

// tlsAlertAccessDenied is a fatal TLS alert record (RFC 8446 6.2,
// access_denied), so that a refused TLS client reports a clear error.
var tlsAlertAccessDenied = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49}

// relayDown copies what up sends to the client on a goroutine of its own
// (the plain io.Copy between the two connections lets the runtime use
// splice(2)), half-closes the client at the end, and then sends the
// number of bytes copied. A client that is no kernel socket (a TCP
// connection of the TUN device's stack) gets copyGrowing's writes.
func relayDown(client, up net.Conn) <-chan int64 {
	done := make(chan int64, 1)
	go func() {
		var n int64
		switch client.(type) {
		case *net.TCPConn, *net.UnixConn:
			n, _ = io.Copy(client, up)
		default:
			n, _ = copyGrowing(client, up)
		}
		closeWrite(client)
		done <- n
	}()
	return done
}

// copyGrowing copies src to dst as io.Copy does, through a buffer that
// grows from 32 KiB to 256 KiB once a read fills it. It is for a dst that
// sends each write as segments of its own (the TUN device's stack): the
// runtime's 32 KiB writes would leave the device's 64 KiB MTU unused,
// and larger ones gave 1.3 to 1.6 times the throughput (bench/egress.sh).
// A connection that never fills the small buffer (an interactive one)
// keeps it, so a proxy serving many such connections holds no more memory
// than with io.Copy.
func copyGrowing(dst io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, rerr := src.Read(buf)
		if k > 0 {
			w, werr := dst.Write(buf[:k])
			n += int64(w)
			if werr != nil {
				return n, werr
			}
			if w != k {
				return n, io.ErrShortWrite
			}
			if k == len(buf) && len(buf) < 256<<10 {
				buf = make([]byte, 256<<10)
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// relayUp sends what was read ahead, then the rest of the client's stream,
// to up; the plain io.Copy between the two connections lets the runtime
// use splice(2). It half-closes up at the end and returns the bytes sent.
func relayUp(up net.Conn, raw []byte, br *bufio.Reader, client net.Conn) int64 {
	defer closeWrite(up)
	n, err := up.Write(raw)
	total := int64(n)
	if err != nil {
		return total
	}
	if k := br.Buffered(); k > 0 {
		b, _ := br.Peek(k)
		n, err = up.Write(b)
		total += int64(n)
		br.Discard(k)
		if err != nil {
			return total
		}
	}
	m, _ := io.Copy(up, client)
	return total + m
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	c.Close()
}

// hostKey is the form in which two spellings of a host compare equal.
func hostKey(h string) string {
	if a, ok := ParseIPLiteral(h); ok {
		return a.Unmap().String()
	}
	if n, err := normalizeHost(h); err == nil {
		return n
	}
	return h
}
