package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestFetch: a public-HTTPS GET comes back (the positive control); a
// redirect, a slow answer, plain HTTP, a body past the cap, an address
// literal and a name that leads to a private address are refused, each
// with its reason. The servers are on loopback, which the test lists in
// AllowCIDRs, except for the private-address case.
func TestFetch(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 4096)) })
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	plain := httptest.NewServer(mux)
	defer plain.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	f := &Fetcher{
		AllowCIDRs: []string{"127.0.0.0/8"},
		Resolver: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if host == "private.test" {
				return []netip.Addr{netip.MustParseAddr("10.0.0.7")}, nil
			}
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		TLS:      &tls.Config{RootCAs: pool},
		Timeout:  500 * time.Millisecond,
		MaxBytes: 1024,
	}
	// httptest's certificate names example.com.
	base := fmt.Sprintf("https://example.com:%d", port)
	res, err := f.Fetch(context.Background(), base+"/ok")
	if err != nil || res.Status != 200 || string(res.Body) != "hello" {
		t.Fatalf("fetch /ok: %+v %v", res, err)
	}
	for _, tt := range []struct{ url, reason string }{
		{base + "/redirect", "redirects are not followed"},
		{base + "/slow", "within the fetch's time limit"},
		{base + "/big", "larger than 1024 bytes"},
		{strings.Replace(plain.URL, "127.0.0.1", "example.com", 1) + "/ok", "only https:// URLs"},
		{fmt.Sprintf("https://127.0.0.1:%d/ok", port), "is an address"},
		{fmt.Sprintf("https://private.test:%d/ok", port), "private"},
		{fmt.Sprintf("https://user:pw@example.com:%d/ok", port), "credentials"},
	} {
		start := time.Now()
		_, err := f.Fetch(context.Background(), tt.url)
		var fe *FetchError
		if !errors.As(err, &fe) || !strings.Contains(fe.Reason, tt.reason) {
			t.Errorf("fetch %s: %v, want a refusal saying %q", tt.url, err, tt.reason)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("fetch %s took %s", tt.url, time.Since(start))
		}
	}
}

// TestFetchEndlessHeader: a server that never ends its response's header
// (or, after a chunked body, its trailer) is refused once the fetch has
// read a bounded amount, rather than held in memory until the time
// limit, which at loopback speed was hundreds of megabytes in the
// daemon's process. The positive control: the same server's ordinary
// answer with a header of a few kilobytes comes back.
func TestFetchEndlessHeader(t *testing.T) {
	written := make(chan int64, 4)
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Pad", strings.Repeat("p", 4096))
		fmt.Fprint(w, "hello")
	})
	endless := func(head string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			c, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			n, _ := buf.WriteString(head)
			line := "X-Pad: " + strings.Repeat("p", 4096) + "\r\n"
			total := int64(n)
			deadline := time.Now().Add(3 * time.Second)
			c.SetWriteDeadline(deadline)
			for time.Now().Before(deadline) {
				k, err := buf.WriteString(line)
				total += int64(k)
				if err != nil || buf.Flush() != nil {
					break
				}
			}
			written <- total
		}
	}
	mux.HandleFunc("/header", endless("HTTP/1.1 200 OK\r\n"))
	mux.HandleFunc("/trailer", endless("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"))
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	f := &Fetcher{
		AllowCIDRs: []string{"127.0.0.0/8"},
		Resolver: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		TLS:     &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs},
		Timeout: 2 * time.Second,
	}
	base := fmt.Sprintf("https://example.com:%d", port)
	if res, err := f.Fetch(context.Background(), base+"/ok"); err != nil || string(res.Body) != "hello" {
		t.Fatalf("fetch /ok: %+v %v", res, err)
	}
	// Go's chunked reader bounds a trailer itself: the case is here so
	// that stays so.
	for path, reason := range map[string]string{"/header": "header is larger than", "/trailer": "trailer"} {
		_, err := f.Fetch(context.Background(), base+path)
		var fe *FetchError
		if !errors.As(err, &fe) || !strings.Contains(fe.Reason, reason) {
			t.Errorf("fetch %s: %v, want a refusal saying %q", path, err, reason)
		}
		if n := <-written; n > 64<<20 {
			t.Errorf("fetch %s read %d MiB before it was refused", path, n>>20)
		}
	}
}
