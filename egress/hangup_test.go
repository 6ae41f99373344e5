package egress

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientHangUpStopsDownload: a client that hangs up in the middle of
// an endless download ends the proxy's download too, rather than the
// proxy reading the rest for nobody. The positive control is the same
// download, the client still reading: the server goes on writing.
func TestClientHangUpStopsDownload(t *testing.T) {
	var sent atomic.Int64
	stopped := make(chan struct{}, 2)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { stopped <- struct{}{} }()
		chunk := make([]byte, 64<<10)
		for {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))

	get := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", port, port)
		br := bufio.NewReader(c)
		status, err := br.ReadString('\n')
		if err != nil || !strings.Contains(status, " 200 ") {
			t.Fatalf("status %q, %v", status, err)
		}
		if _, err := br.Discard(1 << 20); err != nil {
			t.Fatal(err)
		}
		return c, br
	}

	// The control: while the client reads, the download goes on.
	c, br := get()
	before := sent.Load()
	if _, err := br.Discard(32 << 20); err != nil {
		t.Fatal(err)
	}
	if sent.Load() < before+16<<20 {
		t.Fatalf("the server sent %d bytes while the client read 32 MiB", sent.Load()-before)
	}
	select {
	case <-stopped:
		t.Fatal("the server stopped writing while the client read")
	default:
	}
	c.Close()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the download went on 10 s after the client hung up")
	}

	// Hung up after the first MiB: the server's writes fail soon.
	c, _ = get()
	c.Close()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatalf("the download went on 10 s after the client hung up (%d bytes sent)", sent.Load())
	}
}
