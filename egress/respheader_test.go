package egress

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestProxyBoundsResponseHeader: a destination that never ends its
// response's header, or sends interim (1xx) responses without end, gets
// the client a 502 once the proxy has read a bounded amount. Before, the
// proxy held the header in memory for as long as the destination sent
// it (moat's memory, outside every sandbox limit), and read 1xx
// responses for ever. The positive control: a header of 200 KiB and a
// few interim responses before the answer go through.
func TestProxyBoundsResponseHeader(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	written := make(chan int64, 8)
	serveEach(l, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		w := bufio.NewWriter(c)
		deadline := time.Now().Add(5 * time.Second)
		c.SetWriteDeadline(deadline)
		var total int64
		send := func(s string) bool {
			n, err := w.WriteString(s)
			total += int64(n)
			return err == nil && w.Flush() == nil
		}
		pad := "X-Pad: " + strings.Repeat("p", 4096) + "\r\n"
		switch req.URL.Path {
		case "/ok":
			send("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n")
			send("HTTP/1.1 200 OK\r\n" + strings.Repeat(pad, 50) + "Content-Length: 5\r\nConnection: close\r\n\r\nhello")
			return
		case "/header":
			send("HTTP/1.1 200 OK\r\n")
			for time.Now().Before(deadline) && send(pad) {
			}
		case "/interim":
			for time.Now().Before(deadline) && send("HTTP/1.1 103 Early Hints\r\n\r\n") {
			}
		}
		written <- total
	})
	port := l.Addr().(*net.TCPAddr).Port
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	url := fmt.Sprintf("http://allowed.test:%d", port)
	if resp, body := tp.get(t, url+"/ok", fmt.Sprintf("allowed.test:%d", port)); resp.StatusCode != 200 || body != "hello" || len(resp.Header.Get("X-Pad")) != 4096 {
		t.Fatalf("/ok: %d %q", resp.StatusCode, body)
	}
	for path, reason := range map[string]string{"/header": "header is larger than", "/interim": "interim (1xx) responses"} {
		start := time.Now()
		resp, body := tp.get(t, url+path, fmt.Sprintf("allowed.test:%d", port))
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, reason) {
			t.Errorf("%s: %d %q, want 502 saying %q", path, resp.StatusCode, body, reason)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: answered after %s", path, d)
		}
		if n := <-written; n > 16<<20 {
			t.Errorf("%s: the destination sent %d MiB before the proxy gave up", path, n>>20)
		}
	}
}
