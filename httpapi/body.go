package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/moatbox/moat/client"
)

// DefaultBodyIdle is how long a request body may go without a byte
// arriving when Server.BodyIdle is zero. It is generous, for a slow
// network, but bounded: a client that sends a request's headers and then
// nothing would otherwise hold what the request holds (a goroutine, one
// of a tenant's few upload slots) for as long as it keeps the
// connection open.
const DefaultBodyIdle = time.Minute

// bodyDeadline starts the idle bound of r's body, if it has one, before
// its handler runs: a handler that answers without reading the body
// (an error found first) leaves the server to read the rest of it before
// the answer goes, which must not wait for ever either. A handler that
// reads the body reads it through Server.body, which moves the deadline
// on and clears it at the body's end; one that never reads it has no
// read of the connection under way while it runs, so a long answer is
// not cut.
func (s *Server) bodyDeadline(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyIdle()))
	}
}

func (s *Server) bodyIdle() time.Duration {
	if s.BodyIdle <= 0 {
		return DefaultBodyIdle
	}
	return s.BodyIdle
}

// idleBody reads a request body with a read deadline that each read
// pushes back: the body may take as long as it likes in all, but not go
// quiet for longer than idle. The deadline is cleared when the body ends
// (or stop is called), so that what the handler does next, and the
// server's own read of the connection after the body, has none.
type idleBody struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
	on   bool // deadlines are set (the connection supports them)
	// release gives back the tenant's body slot (see MaxBodiesInFlight)
	// once the body has been read; nil when it holds none.
	release func()
}

// body returns r's body bounded to limit bytes (http.MaxBytesReader) and
// read under s's idle timeout.
func (s *Server) body(w http.ResponseWriter, r *http.Request, limit int64) *idleBody {
	release, _ := r.Context().Value(bodySlotKey{}).(func())
	var rd io.Reader = http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength > limit {
		// Refused before a byte is read: a body the client says is over
		// the bound was waited for until it went quiet, or sent whole.
		rd = tooLarge{limit}
	}
	return &idleBody{r: rd, rc: http.NewResponseController(w), idle: s.bodyIdle(), on: true, release: release}
}

// tooLarge is the body of a request whose Content-Length is over its
// bound: every read fails as http.MaxBytesReader's past the bound does.
type tooLarge struct{ limit int64 }

func (t tooLarge) Read([]byte) (int, error) { return 0, &http.MaxBytesError{Limit: t.limit} }

// MaxBodiesInFlight is how many request bodies one tenant may be sending
// at once. The idle bound ends a body that goes quiet, not one that
// trickles a byte now and then: without this bound, one tenant could
// hold as many connections, goroutines and descriptors of the daemon as
// it opened, which every other tenant shares. A body holds its slot until
// it has been read whole (an interactive exec's until its request line
// is read) or its handler returns.
const MaxBodiesInFlight = 32

type bodySlots struct {
	mu sync.Mutex
	n  map[string]int
}

type bodySlotKey struct{}

// take takes one of tenant's slots, and returns what gives it back (once,
// however often it is called).
func (b *bodySlots) take(tenant string) (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == nil {
		b.n = map[string]int{}
	}
	if b.n[tenant] >= MaxBodiesInFlight {
		return nil, &client.Error{Status: http.StatusTooManyRequests, Code: client.CodeQuota,
			Message: fmt.Sprintf("%d request bodies of this tenant are being sent already, the most at once: wait for one to finish", MaxBodiesInFlight)}
	}
	b.n[tenant]++
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			if b.n[tenant]--; b.n[tenant] <= 0 {
				delete(b.n, tenant)
			}
			b.mu.Unlock()
		})
	}, nil
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.on {
		if err := b.rc.SetReadDeadline(time.Now().Add(b.idle)); err != nil {
			// A connection without deadlines (none of the daemon's
			// listeners, but a test's recorder) is read as it is.
			b.on = false
		}
	}
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.stop()
		if b.release != nil {
			b.release()
		}
	}
	if err != nil {
		// On any other error the deadline stays: the server reads what
		// is left of the body before it answers, and must not wait for
		// ever on a client that stopped sending.
		b.on = false
		if timedOut(err) {
			err = &client.Error{Status: http.StatusRequestTimeout, Code: client.CodeBodyTimeout,
				Message: fmt.Sprintf("the request body sent nothing for %s: it was abandoned", b.idle)}
		}
	}
	return n, err
}

// stop clears the deadline and reads on without one: for an interactive
// exec's input once its request line is read, which may rightly be quiet
// for as long as its command runs.
func (b *idleBody) stop() {
	if b.on {
		b.on = false
		b.rc.SetReadDeadline(time.Time{})
	}
	if b.release != nil {
		b.release()
	}
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// bodyError turns an error of reading a whole body into the client's:
// over the bound, abandoned, or cut.
func bodyError(err error, tooBig string) error {
	var ae *client.Error
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mb):
		return &client.Error{Status: http.StatusRequestEntityTooLarge, Code: client.CodeBodyTooLarge, Message: tooBig}
	}
	return &client.Error{Status: http.StatusBadRequest, Code: client.CodeBadRequest, Message: "reading the request body: " + err.Error()}
}

// DefaultKeepAlive is how long an exec's answer stays silent before a
// keepalive event when Server.KeepAlive is zero: short enough for the
// header and read timeouts of common HTTP clients, long enough that a
// command's early error still gets its own status.
const DefaultKeepAlive = 5 * time.Second

func (s *Server) keepAliveEvery() time.Duration {
	if s.KeepAlive <= 0 {
		return DefaultKeepAlive
	}
	return s.KeepAlive
}
