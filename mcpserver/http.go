package mcpserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/daemon"
)

// HTTPConfig is the MCP endpoint of a daemon.
type HTTPConfig struct {
	Manager *daemon.Manager
	// Tenant says who sent a request, by the daemon's own authentication
	// (the unix socket peer's uid, a bearer token); an error refuses the
	// request with 401 and its text.
	Tenant func(*http.Request) (daemon.Tenant, error)
	// IdleTimeout ends an MCP session no request used for this long, and
	// its daemon session with it (15m).
	IdleTimeout time.Duration
	// MaxSessions bounds the MCP sessions a credential keeps at once
	// (64): each holds the SDK's state until it ends or idles out, and a
	// tenant that only ever initialised would grow the daemon's memory.
	MaxSessions int
	Options     Options
	Logger      *slog.Logger
}

// defaultMaxMCPSessions is HTTPConfig.MaxSessions's default.
const defaultMaxMCPSessions = 64

// sessionHeader is the streamable HTTP transport's session id header.
const sessionHeader = "Mcp-Session-Id"

// NewHTTPHandler serves MCP over streamable HTTP. Each MCP session gets
// a daemon session of the tenant that initialised it, made at its first
// tool call: a workspace the daemon makes, unless the initialize request
// names one the tenant may use (?workspace=DIR&workspace_mode=overlay),
// and the default policy. It ends with the MCP session (a DELETE, or
// IdleTimeout without a request). An initialize request that names a
// session of the tenant (?session=ID, made through the API with its own
// policy) uses that one instead, and leaves it alive at the end. Every request of an MCP session must
// come from the tenant that began it, with a credential of the same role;
// another's is refused as if the session did not exist.
func NewHTTPHandler(cfg HTTPConfig) http.Handler {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 15 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = defaultMaxMCPSessions
	}
	h := &httpHandler{cfg: cfg, owners: map[string]string{}, enders: map[string]func(){}, ended: map[string]chan struct{}{}, posts: map[string]context.Context{}, schemas: mcp.NewSchemaCache()}
	h.mcp = mcp.NewStreamableHTTPHandler(h.newServer, &mcp.StreamableHTTPOptions{
		SessionTimeout: cfg.IdleTimeout, Logger: cfg.Logger,
	})
	return h
}

type httpHandler struct {
	cfg HTTPConfig
	mcp *mcp.StreamableHTTPHandler

	// schemas spares the servers made for each request (the SDK asks for
	// one per request) the reflection of the tools' schemas.
	schemas *mcp.SchemaCache

	mu     sync.Mutex
	owners map[string]string // MCP session id -> its credential()
	enders map[string]func() // MCP session id -> what ends its tool calls under way
	// ended: MCP session id -> closed once its daemon session has ended
	// (endWith), which a DELETE waits for before it is answered.
	ended map[string]chan struct{}
	// posts: the postHeader of a POST being served -> its context, which
	// ends when its client goes (postContext).
	posts map[string]context.Context
}

// postHeader tags each POST that ServeHTTP passes to the SDK, which hands
// the request's header to the handlers of the calls it carries
// (mcp.RequestExtra): a call finds its POST's context by it. A client's
// own header of that name is dropped.
const postHeader = "X-Moat-Post"

// postContext is the context of the POST that carried a call, nil when
// there is none to follow (no HTTP request, as over stdio). The serving
// transport keeps no events for a stream to be resumed, so a call whose
// POST has ended (its client went, or it timed out) answers nobody: it
// ends too, and an ask it raised is refused rather than left for a person
// to approve a write nobody waits for. A POST already over when the call
// begins is a context already done.
func (h *httpHandler) postContext(extra *mcp.RequestExtra) context.Context {
	if extra == nil || extra.Header == nil {
		return nil
	}
	tag := extra.Header.Get(postHeader)
	if tag == "" {
		return nil
	}
	h.mu.Lock()
	ctx, ok := h.posts[tag]
	h.mu.Unlock()
	if !ok {
		done, cancel := context.WithCancel(context.Background())
		cancel()
		return done
	}
	return ctx
}

// credential names who began an MCP session: its tenant, and the role of
// the credential it used. The session was made for that role (a
// sessions-only credential's may not ask its client to approve, see
// Options.NoElicit), so another credential of the same tenant may not use
// it either: an agent's would answer its own asks in a session begun by a
// person's.
func credential(t daemon.Tenant) string { return t.ID + " " + t.Role.String() }

type tenantKey struct{}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, err := h.cfg.Tenant(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	// The MCP server's tools run commands in sessions: a credential
	// limited to approvals (daemon.RoleApprovals) has no use of them.
	if err := t.MaySessions(); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	if id := r.Header.Get(sessionHeader); id != "" {
		h.mu.Lock()
		owner, ok := h.owners[id]
		h.mu.Unlock()
		if ok && owner != credential(t) {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
	} else if r.Method == http.MethodPost && h.sessionsOf(credential(t)) >= h.cfg.MaxSessions {
		// A request without a session begins one.
		http.Error(w, fmt.Sprintf("this credential keeps %d MCP sessions, the most allowed: end one (DELETE) or let one idle out", h.cfg.MaxSessions), http.StatusTooManyRequests)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, t))
	var done chan struct{}
	if id := r.Header.Get(sessionHeader); id != "" && r.Method == http.MethodDelete {
		// Its owner's DELETE ends the tool calls under way first: the
		// transport's close waits for them, and their commands would
		// otherwise run on to their end (or the wall limit) with the
		// DELETE waiting, and then answer nobody. A DELETE the transport
		// refuses leaves the session, its calls ended.
		h.mu.Lock()
		end, owned := h.enders[id], h.owners[id] == credential(t)
		done = h.ended[id]
		h.mu.Unlock()
		if end != nil && owned {
			end()
		}
	}
	r.Header.Del(postHeader)
	if r.Method == http.MethodPost {
		tag := rand.Text()
		r.Header.Set(postHeader, tag)
		h.mu.Lock()
		h.posts[tag] = r.Context()
		h.mu.Unlock()
		defer func() {
			h.mu.Lock()
			delete(h.posts, tag)
			h.mu.Unlock()
		}()
	}
	ow := &ownerWriter{ResponseWriter: w, h: h, owner: credential(t)}
	h.mcp.ServeHTTP(ow, r)
	// Only a DELETE the transport carried out ends the session: one it
	// refused (a bad protocol version) leaves the session alive, and the
	// owner must stay with it, or the next tenant to use its id would
	// pass the check above and become its owner.
	if id := r.Header.Get(sessionHeader); id != "" && r.Method == http.MethodDelete && ow.status/100 == 2 {
		h.forget(id)
		// Answered once the sandbox is gone, not while it is still being
		// taken down (the response goes when the handler returns).
		if done != nil {
			select {
			case <-done:
			case <-r.Context().Done():
			}
		}
	}
}

// sessionsOf counts the live MCP sessions begun with credential c.
func (h *httpHandler) sessionsOf(c string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, o := range h.owners {
		if o == c {
			n++
		}
	}
	return n
}

// forget drops an MCP session's owner: the session has ended.
func (h *httpHandler) forget(id string) {
	h.mu.Lock()
	delete(h.owners, id)
	delete(h.enders, id)
	delete(h.ended, id)
	h.mu.Unlock()
}

// ownerWriter records the credential of the MCP session a response
// begins.
type ownerWriter struct {
	http.ResponseWriter
	h      *httpHandler
	owner  string // credential
	done   bool
	status int // the response's status, once it has begun
}

func (o *ownerWriter) WriteHeader(code int) {
	o.record()
	if o.status == 0 {
		o.status = code
	}
	o.ResponseWriter.WriteHeader(code)
}

func (o *ownerWriter) Write(b []byte) (int, error) {
	o.record()
	if o.status == 0 {
		o.status = http.StatusOK
	}
	return o.ResponseWriter.Write(b)
}

func (o *ownerWriter) Flush() {
	o.record()
	if f, ok := o.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (o *ownerWriter) Unwrap() http.ResponseWriter { return o.ResponseWriter }

func (o *ownerWriter) record() {
	if o.done {
		return
	}
	o.done = true
	if id := o.Header().Get(sessionHeader); id != "" {
		o.h.mu.Lock()
		if _, ok := o.h.owners[id]; !ok {
			o.h.owners[id] = o.owner
		}
		o.h.mu.Unlock()
	}
}

// newServer is the MCP server of a new MCP session (the SDK also asks for
// one to read its protocol versions: making it makes no daemon session).
func (h *httpHandler) newServer(r *http.Request) *mcp.Server {
	t, ok := r.Context().Value(tenantKey{}).(daemon.Tenant)
	if !ok {
		return nil
	}
	q := r.URL.Query()
	req := &daemon.CreateRequest{Workspace: q.Get("workspace"), WorkspaceMode: q.Get("workspace_mode"), IdleTimeout: h.cfg.IdleTimeout}
	network := &NetworkLog{}
	req.NetworkEvents = network.Record
	opts := h.cfg.Options
	opts.Network = network
	opts.NoElicit = t.MayApprovals() != nil
	s := newServer(&opts)
	// ?session=ID attaches the MCP session to a session the tenant made
	// through the API, with whatever policy it was made with; it outlives
	// the MCP session. Otherwise the MCP session has one of its own.
	attached := q.Get("session")
	s.open = func(ctx context.Context) (*daemon.Session, error) {
		if attached == "" {
			return h.cfg.Manager.Create(ctx, t, req)
		}
		if req.Workspace != "" || req.WorkspaceMode != "" {
			return nil, errors.New("name a session or a workspace, not both: an existing session keeps its own workspace")
		}
		return h.cfg.Manager.Get(t, attached)
	}
	srv := s.mcpServer("Every tool acts inside a moat sandbox session of its own. ", &mcp.ServerOptions{SchemaCache: h.schemas})
	// The MCP session's end ends the daemon session. It is watched from
	// the initialize request, not the initialized notification: the SDK
	// serves tool calls of a client that never sends the notification, and
	// their daemon session would outlive the MCP session.
	var watch sync.Once
	calls := newCallGroup()
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && method == "initialize" {
				watch.Do(func() {
					h.mu.Lock()
					h.enders[ss.ID()] = calls.endAll
					done := make(chan struct{})
					h.ended[ss.ID()] = done
					h.mu.Unlock()
					go func() {
						defer close(done)
						h.endWith(ss, s, t, attached)
					}()
				})
			}
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(calls.current(), cancel)()
			if !strings.HasPrefix(method, "notifications/") {
				if post := h.postContext(req.GetExtra()); post != nil {
					defer context.AfterFunc(post, cancel)()
				}
			}
			return next(ctx, method, req)
		}
	})
	return srv
}

// callGroup ends the requests an MCP session's server is handling at a
// moment (its DELETE), and not those that come after.
type callGroup struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
}

func newCallGroup() *callGroup {
	g := &callGroup{}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g
}

// current is the context the requests handled now end with.
func (g *callGroup) current() context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ctx
}

// endAll ends the requests handled now.
func (g *callGroup) endAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cancel()
	g.ctx, g.cancel = context.WithCancel(context.Background())
}

// endWith waits for the MCP session ss to end, then ends the daemon
// session s made for it (not one it attached to).
func (h *httpHandler) endWith(ss *mcp.ServerSession, s *server, t daemon.Tenant, attached string) {
	ss.Wait()
	h.forget(ss.ID())
	s.mu.Lock()
	s.closed = true
	sess := s.sess
	s.mu.Unlock()
	if sess != nil && attached == "" {
		if err := h.cfg.Manager.Delete(context.Background(), t, sess.ID); err != nil {
			h.cfg.Logger.Warn("end the session of an MCP session", "session", sess.ID, "err", err)
		}
	}
}
