package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
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

// TestInSandboxAddressNotDialled: an address that stands for moat inside
// the sandbox (its resolver's) is refused on every front end, even where
// allow_cidrs covers it: the proxy dialled whatever answered it on the
// host's network (found by a tester). The control: another address of
// the same range is dialled.
func TestInSandboxAddressNotDialled(t *testing.T) {
	tp := newProxy(t, mustRules(t, nil, nil, []string{"198.18.0.0/15"}))
	tp.InSandbox = []netip.Addr{netip.MustParseAddr("198.18.0.2")}
	var dialled []netip.AddrPort
	tp.Dial = func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		dialled = append(dialled, ap)
		return nil, errors.New("test: no such host")
	}
	resp, body := tp.get(t, "http://198.18.0.2:53/", "198.18.0.2:53")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "moat's address" || !strings.Contains(body, "never reached") {
		t.Errorf("a forward to moat's resolver: %d %q", resp.StatusCode, body)
	}
	if c, r := tp.connect(t, "198.18.0.2:53"); c != nil || r.StatusCode != http.StatusForbidden || r.Header.Get("X-Moat-Denied") != "moat's address" {
		t.Errorf("CONNECT to moat's resolver: %v", r.Status)
	}
	if _, rep := tp.socks(t, socksAtypIPv4, []byte{198, 18, 0, 2}, 53); rep != socksNotAllowed {
		t.Errorf("SOCKS5 to moat's resolver: reply %d", rep)
	}
	if len(dialled) != 0 {
		t.Errorf("dialled %v", dialled)
	}
	tp.get(t, "http://198.18.0.3:53/", "198.18.0.3:53")
	if len(dialled) != 1 || dialled[0].Addr() != netip.MustParseAddr("198.18.0.3") {
		t.Errorf("control: dialled %v, want 198.18.0.3", dialled)
	}
}

// TestMalformedBodyAnswered: a chunked body whose trailer is malformed (a
// folded line), or a body cut short by its client, gets 400 naming the
// body, and the destination's connection is closed: the proxy waited for
// the destination's answer, which waited for the rest of the body, and
// the client got nothing (found by a tester).
func TestMalformedBodyAnswered(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.ReadAll(r.Body) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, []string{"127.0.0.0/8"}))
	head := fmt.Sprintf("POST http://allowed.test:%d/ HTTP/1.1\r\nHost: allowed.test:%d\r\nTransfer-Encoding: chunked\r\nTrailer: X-A\r\nConnection: close\r\n\r\n", port, port)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, body := tp.raw(t, head+"5\r\nhello\r\n0\r\n Host: evil\r\n\r\n")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "the request's body could not be read") {
			t.Errorf("a folded trailer: %d %q, want 400 naming the body", resp.StatusCode, body)
		}
	}()
	select {
	case <-done:
	case <-time.After(8 * time.Second):
		t.Fatal("a folded trailer: no answer")
	}
	wantEvent(t, tp.event(t), ProtoHTTP, DecisionError, "bad request")
	resp, _ := tp.raw(t, head+"5\r\nhello\r\n0\r\nX-A: b\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Errorf("control: a well-formed trailer: %d", resp.StatusCode)
	}
}
