//go:build linux

package httpapi_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
)

// TestFirstRequestsAtOnce: the first requests of a fresh server, all at
// once (clients reconnecting to a restarted daemon), are each answered by
// their route: none gets a 404, a dropped connection, or a server left
// without some of its routes.
func TestFirstRequestsAtOnce(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	for round := 0; round < 300; round++ {
		srv := &httpapi.Server{Manager: d.m, StateDir: d.state}
		sock := filepath.Join(t.TempDir(), "s")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		hs := srv.HTTPServer()
		go hs.Serve(l)
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
		var wg sync.WaitGroup
		start := make(chan struct{})
		bad := make(chan string, 64)
		for i := 0; i < 32; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				resp, err := hc.Get("http://moat/v1/sessions")
				if err != nil {
					bad <- err.Error()
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					bad <- resp.Status
				}
			}()
		}
		close(start)
		wg.Wait()
		close(bad)
		for b := range bad {
			t.Errorf("round %d: a first request: %s", round, b)
		}
		// And afterwards every route is there.
		for _, path := range []string{"/v1/sessions", "/v1/approvals", "/metrics"} {
			resp, err := hc.Get("http://moat" + path)
			if err != nil {
				t.Fatalf("round %d: %s: %v", round, path, err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("round %d: %s after the first requests: %s", round, path, resp.Status)
			}
		}
		hc.CloseIdleConnections()
		hs.Close()
		if t.Failed() {
			return
		}
	}
}
