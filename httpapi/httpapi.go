// Package httpapi serves a daemon.Manager over HTTP: JSON in and out,
// exec output streamed as NDJSON (an interactive exec's input read from
// the same request while it runs), tar archives of workspace directories,
// a session's audit records as NDJSON or server-sent events, the wire
// types of package client.
//
// It owns the transport's rules: who the tenant is (the peer's uid on a
// unix socket, a bearer token's tenant over TCP, nothing else), refusing
// requests a browser sends (an Origin header not configured), bounding and
// strictly decoding request bodies (unknown fields refused), and turning
// every error into {"error":{"code","message"}} with a stable code, a
// message safe to show and the right status. A panic in a handler becomes
// a 500 of that form; the daemon keeps serving. It also serves the
// approvals page (page.go) with its own way in for a browser: a one-time
// login link, a cookie, a CSRF token, a strict Content-Security-Policy.
// What a tenant may do with a session or an approval is package daemon's
// decision, not this one's.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// Server is the HTTP side of a daemon.
type Server struct {
	Manager *daemon.Manager
	// Tokens authenticates TCP requests; nil refuses them all.
	Tokens *Tokens
	// AllowOrigins lists the browser origins allowed (exact match);
	// a request with any other Origin header is refused.
	AllowOrigins []string
	// MaxBody bounds a request body (1 MiB when zero).
	MaxBody int64
	// BodyIdle bounds how long a request body may send nothing before it
	// is abandoned with a body_timeout error (DefaultBodyIdle when zero).
	// An interactive exec's input, quiet while its command runs, is
	// bounded only until its request line is read.
	BodyIdle time.Duration
	// StateDir is removed from error texts shown to tenants.
	StateDir string
	Logger   *slog.Logger
	// MCP, if set, serves /mcp (package mcpserver's HTTP handler, which
	// authenticates with Tenant); the origin check applies to it too.
	MCP http.Handler
	// WebAddr is the TCP address (host:port) a browser reaches the
	// approvals page at, for the login links of POST
	// /v1/approvals/web-login; "" when there is none.
	WebAddr string
	// WebURL, if set, is the origin a browser reaches the page at
	// instead (a TLS proxy's https://host): the login links name it
	// rather than WebAddr. CheckWebURL says what it may be.
	WebURL string

	// KeepAlive is how long an exec's answer may stay silent before a
	// keepalive event is sent (DefaultKeepAlive when zero).
	KeepAlive time.Duration

	// MaxConnsPerCaller bounds the connections one caller holds open at
	// once: a unix socket peer's uid, or a TCP peer's address (loopback
	// as one, an IPv6 peer by its /64) before its token is read. Past
	// it, the caller's oldest connection that has shown no valid token
	// is closed to make room, or, when there is none, the new one is
	// answered 429 and closed: one caller cannot take every file
	// descriptor of the daemon's, nor, with connections that never show
	// a token, lock out the tenants that share its address (a proxy's).
	// Zero: DefaultMaxConnsPerCaller.
	MaxConnsPerCaller int
	conns             connCount

	// initOnce builds mux at the first request: requests that come at
	// once must not build it twice, or route through one half built.
	initOnce sync.Once
	mux      *http.ServeMux
	web      webAuth
	metrics  metrics
	bodies   bodySlots
}

// route is one endpoint; Routes lists them for the API's documentation test.
type route struct {
	method, path string
	handle       func(*Server, http.ResponseWriter, *http.Request, daemon.Tenant) error
}

var routes = []route{
	{"POST", "/v1/sessions", (*Server).createSession},
	{"GET", "/v1/sessions", (*Server).listSessions},
	{"GET", "/v1/sessions/{id}", (*Server).getSession},
	{"DELETE", "/v1/sessions/{id}", (*Server).deleteSession},
	{"POST", "/v1/sessions/{id}/exec", (*Server).exec},
	{"GET", "/v1/sessions/{id}/processes", (*Server).listProcesses},
	{"POST", "/v1/sessions/{id}/processes/{pid}/signal", (*Server).signal},
	{"GET", "/v1/sessions/{id}/processes/{pid}/output", (*Server).output},
	{"POST", "/v1/sessions/{id}/processes/{pid}/stdin", (*Server).writeStdin},
	{"GET", "/v1/sessions/{id}/files", (*Server).readFile},
	{"PUT", "/v1/sessions/{id}/files", (*Server).writeFile},
	{"DELETE", "/v1/sessions/{id}/files", (*Server).removeFile},
	{"GET", "/v1/sessions/{id}/files/stat", (*Server).statFile},
	{"GET", "/v1/sessions/{id}/files/list", (*Server).listDir},
	{"GET", "/metrics", (*Server).serveMetrics},
	{"GET", "/v1/approvals", (*Server).listApprovals},
	{"GET", "/v1/approvals/{id}", (*Server).getApproval},
	{"POST", "/v1/approvals/{id}/approve", (*Server).approve},
	{"POST", "/v1/approvals/{id}/deny", (*Server).deny},
	{"POST", "/v1/approvals/web-login", (*Server).webLogin},
	{"GET", "/v1/sessions/{id}/diff", (*Server).diffSession},
	{"POST", "/v1/sessions/{id}/apply", (*Server).applySession},
	{"POST", "/v1/sessions/{id}/discard", (*Server).discardSession},
	{"GET", "/v1/sessions/{id}/events", (*Server).sessionEvents},
	{"GET", "/v1/sessions/{id}/files/tar", (*Server).downloadTar},
	{"PUT", "/v1/sessions/{id}/files/tar", (*Server).uploadTar},
	{"POST", "/v1/sessions/{id}/fetch", (*Server).fetch},
}

// Routes returns "METHOD PATH" for every endpoint.
func Routes() []string {
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = r.method + " " + r.path
	}
	return out
}

type connKey struct{}

// connInfo is what the connection says about the peer.
type connInfo struct {
	conn net.Conn
	unix bool
	uid  int
	// refused: why the unix socket's peer may not use it (see peer).
	refused string
	// busy: why the daemon cannot serve the connection now (no file
	// descriptor is free).
	busy string
}

// tooMany answers a connection past its caller's bound and closes it.
func tooMany(c net.Conn, max int) {
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": client.CodeQuota,
		"message": fmt.Sprintf("this caller holds %d connections to the daemon already, the most it may", max)}})
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	fmt.Fprintf(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c.Close()
}

// HTTPServer returns an http.Server for s: it learns each unix socket
// peer's uid when the connection is accepted. Serve it on unix and TCP
// listeners alike.
func (s *Server) HTTPServer() *http.Server {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			ci := connInfo{uid: -1, conn: c}
			key := "addr:?"
			if uc, ok := c.(*net.UnixConn); ok {
				ci.unix = true
				uid, refused, err := peer(uc)
				switch {
				case err == nil:
					ci.uid, ci.refused = uid, refused
					key = "uid:" + strconv.Itoa(uid)
				case errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE):
					ci.busy = "the daemon has no file descriptor free: try again"
				}
			} else if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
				key = callerKey(ap.Addr())
			}
			max := s.MaxConnsPerCaller
			if max <= 0 {
				max = DefaultMaxConnsPerCaller
			}
			// A unix socket's peer is known by the kernel's word: its
			// connections are its tenant's from the start.
			if !s.conns.open(c, key, max, ci.unix && ci.uid >= 0) {
				// Closed as it is accepted (this runs in the accept
				// loop), with the answer its request will get: a
				// connection that sent nothing held a descriptor until
				// the header's timeout, and 20,000 of them took all the
				// daemon had (found by a tester). Over TCP the client
				// may see a reset instead.
				tooMany(c, max)
			}
			return context.WithValue(ctx, connKey{}, ci)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				s.conns.closed(c)
			}
		},
	}
}

func (s *Server) init() { s.initOnce.Do(s.build) }

func (s *Server) build() {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.MaxBody <= 0 {
		s.MaxBody = 1 << 20
	}
	s.mux = http.NewServeMux()
	for _, rt := range routes {
		s.mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) {
			t, err := s.tenant(r)
			if err == nil {
				err = mayReach(t, rt.path)
			}
			if err == nil && r.ContentLength != 0 {
				var release func()
				if release, err = s.bodies.take(t.ID); err == nil {
					defer release()
					r = r.WithContext(context.WithValue(r.Context(), bodySlotKey{}, release))
				} else {
					// The body is not read: the connection ends with the
					// answer, which net/http would otherwise hold back
					// while it read that body, trickling, to its end.
					w.Header().Set("Connection", "close")
				}
			}
			if err == nil {
				s.bodyDeadline(w, r)
				err = rt.handle(s, w, r, t)
			}
			if err != nil {
				s.fail(w, r, err)
			}
		})
	}
	if s.MCP != nil {
		// Its bodies are bounded in time as the API's are (MaxBody is
		// the MCP handler's own business).
		s.mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
			s.bodyDeadline(w, r)
			r.Body = struct {
				io.Reader
				io.Closer
			}{s.body(w, r, 1<<62), r.Body}
			s.MCP.ServeHTTP(w, r)
		})
	}
	s.pageRoutes()
}

// ServeHTTP checks the origin, recovers from panics and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.init()
	start := time.Now()
	rw := &statusWriter{ResponseWriter: w}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.Logger.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !rw.wrote {
				writeError(rw, &client.Error{Status: 500, Code: client.CodeInternal, Message: "internal error"})
			}
		}
		s.Logger.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rw.status, "duration", time.Since(start).String())
	}()
	if interactiveBody(r) {
		// An interactive exec's body stays open while its command runs.
		// Answered with an error before it is read (an unknown session,
		// a refused credential), net/http would read the body to its end
		// before it sent the answer, for the connection's next request,
		// which the client, holding the body open for the command, never
		// ends: the connection ends with the answer instead. (It ends
		// with an interactive exec's own answer too: see execInteractive.)
		w.Header().Set("Connection", "close")
	}
	if ci, _ := r.Context().Value(connKey{}).(connInfo); ci.busy != "" {
		// Before any route, and the connection goes: its descriptor is
		// what is short.
		rw.Header().Set("Connection", "close")
		writeError(rw, &client.Error{Status: http.StatusServiceUnavailable, Code: client.CodeBusy, Message: ci.busy})
		return
	}
	if ci, _ := r.Context().Value(connKey{}).(connInfo); ci.refused != "" {
		// Before any route: the API, /mcp and the pages alike. The
		// connection is not kept: a sandbox must not hold the daemon's
		// fds with connections it may not use.
		rw.Header().Set("Connection", "close")
		s.bodyDeadline(rw, r)
		writeError(rw, &client.Error{Status: http.StatusForbidden, Code: client.CodeForbidden,
			Message: "refused: " + ci.refused})
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !slices.Contains(s.AllowOrigins, o) && !samePageOrigin(r, o) {
		s.bodyDeadline(rw, r)
		writeError(rw, &client.Error{Status: http.StatusForbidden, Code: client.CodeOriginRefused,
			Message: "requests from a browser origin are refused (moat serve --allow-origin allows one)"})
		return
	}
	if p := r.URL.Path; p != path.Clean(p) && p != path.Clean(p)+"/" {
		// The mux would redirect it, in HTML: an API client is told in
		// JSON, and nothing answers a path under another spelling.
		s.bodyDeadline(rw, r)
		writeError(rw, &client.Error{Status: http.StatusNotFound, Code: client.CodeNotFound,
			Message: fmt.Sprintf("no such endpoint: %q is not written in its clean form (%q)", p, path.Clean(p))})
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.bodyDeadline(rw, r)
		s.noRoute(rw, r)
		return
	}
	s.mux.ServeHTTP(rw, r)
}

// noRoute answers a path no route has (404) or a method the path's route
// does not take (405), in JSON.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{"GET", "POST", "DELETE", "PUT"} {
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, p := s.mux.Handler(r2); p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, &client.Error{Status: http.StatusMethodNotAllowed, Code: client.CodeMethod,
			Message: fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", "))})
		return
	}
	writeError(w, &client.Error{Status: http.StatusNotFound, Code: client.CodeNotFound, Message: "no such endpoint"})
}

// jsonKind says what JSON a Go type takes, for a type error's message.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("an integer from 0 to %d", uint64(1)<<(t.Bits())-1)
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}

// mayReach refuses a route the tenant's credential may not use (its
// daemon.Role): the approvals' routes, or the sessions' ones. The daemon
// checks the same in each of its calls; checking here too refuses the
// request before its body is read, and answers a list with an error
// rather than an empty one. The metrics name no tenant: any may read them.
func mayReach(t daemon.Tenant, path string) error {
	switch {
	case path == "/metrics":
		return nil
	case strings.HasPrefix(path, "/v1/approvals"):
		return t.MayApprovals()
	}
	return t.MaySessions()
}

// Tenant says who sent r: the peer's uid on a unix socket; over TCP, the
// tenant of a valid bearer token.
func (s *Server) Tenant(r *http.Request) (daemon.Tenant, error) { return s.tenant(r) }

func (s *Server) tenant(r *http.Request) (daemon.Tenant, error) {
	ci, _ := r.Context().Value(connKey{}).(connInfo)
	if ci.unix {
		if ci.uid < 0 {
			return daemon.Tenant{}, &client.Error{Status: http.StatusUnauthorized, Code: client.CodeUnauthorized, Message: "the peer's credentials are unknown"}
		}
		return daemon.UIDTenant(ci.uid), nil
	}
	if len(r.Header.Values("Authorization")) > 1 {
		// Which one a proxy in front meant cannot be told.
		return daemon.Tenant{}, &client.Error{Status: http.StatusUnauthorized, Code: client.CodeUnauthorized, Message: "more than one Authorization header: send one bearer token"}
	}
	// The scheme is case-insensitive (RFC 9110 11.1).
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	ok = ok && strings.EqualFold(scheme, "Bearer")
	if ok && s.Tokens != nil {
		if name, role, ok := s.Tokens.Lookup(tok); ok {
			// Its connection is a tenant's now: no longer one that
			// room is made from for others (connCount).
			s.conns.known(ci.conn)
			return daemon.TokenTenantRole(name, role), nil
		}
	}
	return daemon.Tenant{}, &client.Error{Status: http.StatusUnauthorized, Code: client.CodeUnauthorized, Message: "a valid bearer token is required"}
}

// decode reads r's JSON body into v: bounded, unknown fields refused,
// nothing after the value.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	body := s.body(w, r, s.MaxBody)
	dec := json.NewDecoder(body)
	// Every body is an object: `null`, which Decode would take as
	// nothing at all, is refused as an empty body is, not read as a
	// request that sets nothing.
	var raw json.RawMessage
	err := dec.Decode(&raw)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON value")
	}
	if err == nil && raw[0] != '{' {
		err = errors.New("the body is not a JSON object")
	}
	if err == nil {
		err = strictKeys(raw, reflect.TypeOf(v))
	}
	if err == nil {
		obj := json.NewDecoder(bytes.NewReader(raw))
		obj.DisallowUnknownFields()
		err = obj.Decode(v)
	}
	if err == nil {
		_, err = io.Copy(io.Discard, body)
	}
	var tooBig *http.MaxBytesError
	var ae *client.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &tooBig):
		return &client.Error{Status: http.StatusRequestEntityTooLarge, Code: client.CodeBodyTooLarge,
			Message: fmt.Sprintf("the request body is over %d bytes", s.MaxBody)}
	case errors.Is(err, io.EOF):
		return &client.Error{Status: http.StatusBadRequest, Code: client.CodeBadRequest, Message: "the request body is empty: a JSON object is required"}
	}
	return badRequest("malformed request body: %s", jsonProblem(err, "the body"))
}

// jsonProblem is a decoding error of whole, a JSON value, said in the
// API's terms rather than Go's (struct and field types).
func jsonProblem(err error, whole string) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		what := whole
		if te.Field != "" {
			what = "field " + te.Field
		}
		return fmt.Sprintf("%s: a JSON %s is not what it takes (%s)", what, te.Value, jsonKind(te.Type))
	}
	return err.Error()
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *client.Error) {
	if len(e.Message) > maxMessage || slices.ContainsFunc(e.Details, func(d string) bool { return len(d) > maxMessage }) {
		c := *e
		c.Message = bounded(c.Message)
		c.Details = make([]string, len(e.Details))
		for i, d := range e.Details {
			c.Details[i] = bounded(d)
		}
		e = &c
	}
	writeJSON(w, e.Status, map[string]*client.Error{"error": e})
}

// maxMessage bounds an error's message and each of its details: a
// message that quotes what the client sent (a signal's name, a field)
// returned the whole of it, however large (found by a tester).
const maxMessage = 4096

// bounded is s cut to maxMessage bytes, on a character's boundary,
// saying how much it left out.
func bounded(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes more)", s[:cut], len(s)-cut)
}

// statusWriter remembers whether, and with what status, the response
// has started.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeLine writes v as one line of JSON.
func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
