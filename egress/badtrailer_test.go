package egress

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHeaderOnlyTrailersRefused: a plain-HTTP request whose trailers
// carry a field the proxy's checks read in the headers (Host, whose
// check a trailer naming another host passed; a method override, which
// the rules' method would not see) is refused (403, audited) and its
// trailers never reach the server, with or without secrets. The
// control: another trailer is forwarded.
func TestHeaderOnlyTrailersRefused(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, fmt.Sprint(r.Trailer))
		mu.Unlock()
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, []string{"127.0.0.0/8"}))
	post := func(name, value string) (*http.Response, string) {
		return tp.raw(t, fmt.Sprintf("POST http://allowed.test:%d/ HTTP/1.1\r\nHost: allowed.test:%d\r\nTransfer-Encoding: chunked\r\nTrailer: %s\r\nConnection: close\r\n\r\n%s",
			port, port, name, chunked(name+": "+value+"\r\n")))
	}
	for _, tc := range []struct{ name, value string }{
		{"Host", "other.test"},
		{"X-HTTP-Method-Override", "DELETE"},
		{"authorization", "Bearer x"},
	} {
		resp, body := post(tc.name, tc.value)
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "bad trailer" || !strings.Contains(body, "as a trailer") {
			t.Errorf("a %s trailer: %d %q, want 403 by bad trailer", tc.name, resp.StatusCode, body)
		}
		wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, "bad trailer")
	}
	resp, body := post("X-Sig", "own")
	if resp.StatusCode != 200 {
		t.Errorf("control: an X-Sig trailer: %d %q", resp.StatusCode, body)
	}
	tp.event(t)
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(got, "\n")
	if !strings.Contains(all, "map[X-Sig:[own]]") || strings.Contains(all, "other.test") || strings.Contains(all, "DELETE") {
		t.Errorf("the server got trailers %q; want X-Sig only", all)
	}
}
