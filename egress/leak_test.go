package egress

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// seenServer is an HTTPS destination that records, for each request, its
// headers, body and trailers as they arrived, so that a test can tell
// what the proxy let out.
type seenServer struct {
	port int
	mu   sync.Mutex
	reqs []string
}

func newSeenServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *seenServer {
	t.Helper()
	s := new(seenServer)
	s.port = tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, fmt.Sprintf("url=%s user=%v header=%v body=%q trailer=%v", r.URL, r.URL.User, r.Header, body, r.Trailer))
		s.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		io.WriteString(w, "ok")
	})
	return s
}

// all is everything the server received so far.
func (s *seenServer) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.reqs, "\n")
}

func (s *seenServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// TestSecretUserinfoRefused: a placeholder in the user information of an
// absolute-form request URL was dropped with the user information,
// silently, where a placeholder anywhere else the secret does not go is
// refused. It is now refused (403, audited, the server gets nothing):
// over plain HTTP, inside a tunnel to a host the secret is not for, and
// inside a tunnel to its own host too, since clients turn a URL's user
// information into Basic credentials rather than send it, and moat adds
// secrets to headers only. The control: the same placeholder in the
// Authorization header on the secret's host is replaced, and the server
// gets the value; a URL with user information but no placeholder is
// still forwarded, without it.
func TestSecretUserinfoRefused(t *testing.T) {
	srv := newSeenServer(t, nil)
	tp, secs := secretsProxy(t, testRoots())
	tok := secs.list[0].Placeholder
	port := srv.port

	resp, body := tp.raw(t, fmt.Sprintf("GET http://u:%s@denied.test:%d/ HTTP/1.1\r\nHost: denied.test:%d\r\nConnection: close\r\n\r\n", tok, port, port))
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" || !strings.Contains(body, "secret TOKEN in the user information") {
		t.Errorf("plain HTTP with the placeholder in the user information: %d %q; want 403 naming secret TOKEN", resp.StatusCode, body)
	}
	wantEvent(t, tp.nextOf(t, ProtoHTTP), ProtoHTTP, DecisionDeny, "secret placeholder")

	for _, tc := range []struct{ host, path string }{
		{"allowed.test", "/api/x"},
		{"other.test", "/x"},
	} {
		hostport := fmt.Sprintf("%s:%d", tc.host, port)
		for _, user := range []string{"u:" + tok, tok, "u:" + strings.ReplaceAll(tok, "-", "%2D")} {
			resp, body := interceptedRaw(t, tp, secs, hostport, fmt.Sprintf("GET https://%s@%s%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", user, hostport, tc.path, hostport))
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "secret placeholder" || !strings.Contains(body, "secret TOKEN") ||
				strings.Contains(body, "real-") {
				t.Errorf("%s with %q in the user information: %d %q; want 403 naming secret TOKEN", tc.host, user, resp.StatusCode, body)
			}
			e := tp.nextOf(t, ProtoIntercepted)
			wantEvent(t, e, ProtoIntercepted, DecisionDeny, "secret placeholder")
			contains(t, e.Reason, "user information")
		}
	}
	if n := srv.count(); n != 0 {
		t.Fatalf("the server received %d refused requests: %s", n, srv.all())
	}

	// The controls.
	hostport := fmt.Sprintf("allowed.test:%d", port)
	resp, body = interceptedRaw(t, tp, secs, hostport, fmt.Sprintf("GET /api/x HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", hostport, tok))
	if got := srv.all(); resp.StatusCode != 200 || !strings.Contains(got, "Bearer real-token-1") {
		t.Errorf("the placeholder in Authorization: %d %q, the server got %q; want the value there", resp.StatusCode, body, got)
	}
	wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionAllow, "")
	resp, body = interceptedRaw(t, tp, secs, hostport, fmt.Sprintf("GET https://u:pw@%s/api/y HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport, hostport))
	if got := srv.all(); resp.StatusCode != 200 || !strings.Contains(got, "url=/api/y user= ") {
		t.Errorf("user information without a placeholder: %d %q, the server got %q; want it forwarded without the user information", resp.StatusCode, body, got)
	}
	wantEvent(t, tp.nextOf(t, ProtoIntercepted), ProtoIntercepted, DecisionAllow, "")
}
