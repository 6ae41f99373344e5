package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestInterceptALPN: a client that offers HTTP/1.0 alone in ALPN (curl -0)
// is intercepted and served, as one offering HTTP/1.1 is (the control);
// its handshake failed, with a refusal blaming moat's CA. One that offers
// only a protocol moat does not read there (h2) is refused, saying so.
func TestInterceptALPN(t *testing.T) {
	srv := newSeenServer(t, nil)
	tp, secs := secretsProxy(t, testRoots())
	hostport := fmt.Sprintf("allowed.test:%d", srv.port)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(secs.CACertPEM())
	dial := func(protos ...string) (*tls.Conn, error) {
		c, resp := tp.connect(t, hostport)
		if c == nil {
			t.Fatalf("CONNECT %s: %d", hostport, resp.StatusCode)
		}
		tc := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "allowed.test", NextProtos: protos})
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		return tc, tc.Handshake()
	}
	for _, protos := range [][]string{{"http/1.1"}, {"http/1.0"}} {
		tc, err := dial(protos...)
		if err != nil {
			t.Errorf("ALPN %v: %v", protos, err)
			continue
		}
		io.WriteString(tc, "GET /api/x HTTP/1.0\r\nHost: "+hostport+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("ALPN %v: %v %v", protos, err, resp)
		}
		tc.Close()
		tp.nextOf(t, ProtoIntercepted)
	}
	if _, err := dial("h2"); err == nil {
		t.Error("ALPN h2 alone: the handshake passed")
	}
	var e Event
	for range 5 {
		if e = tp.nextOf(t, ProtoConnect); e.Rule == "tls interception" {
			break
		}
	}
	if e.Rule != "tls interception" || !strings.Contains(e.Reason, "application protocols") || strings.Contains(e.Reason, "trust moat's CA") {
		t.Errorf("ALPN h2 alone: %+v", e)
	}
}
