package egress

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// warningAlert is an alert record of level warning (unrecognized_name),
// which crypto/tls, OpenSSL and BoringSSL servers skip before a
// ClientHello.
const warningAlert = "\x15\x03\x01\x00\x02\x01\x70"

// alertFirst sends a warning alert record before the first bytes written
// to it, the client's ClientHello.
type alertFirst struct {
	net.Conn
	sent bool
}

func (c *alertFirst) Write(b []byte) (int, error) {
	if c.sent {
		return c.Conn.Write(b)
	}
	c.sent = true
	if _, err := c.Conn.Write(append([]byte(warningAlert), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// sniServer is a crypto/tls HTTPS server that answers with the server
// name of the handshake, and reports on names every name a ClientHello
// that reached it carried.
func sniServer(t *testing.T) (port int, names chan string) {
	names = make(chan string, 100)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "server name %s", r.TLS.ServerName)
	}))
	s.TLS = &tls.Config{
		Certificates: []tls.Certificate{testCert()},
		GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
			names <- chi.ServerName
			return nil, nil
		},
	}
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.StartTLS()
	t.Cleanup(s.Close)
	return s.Listener.Addr().(*net.TCPAddr).Port, names
}

// TestTunnelAlertBeforeClientHello: a warning alert record before the
// ClientHello, which a TLS server skips, does not hide the ClientHello's
// server name from the tunnel's check, through CONNECT and SOCKS5: a
// name other than the target's is refused before any byte reaches the
// server. The controls: the plain ClientHello and the alert-prefixed one
// naming the target both complete a handshake and a request with the
// server behind the proxy, which therefore skips the alert the proxy
// passed on (the probe is one a real server acts on).
func TestTunnelAlertBeforeClientHello(t *testing.T) {
	port, names := sniServer(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	open := map[string]func() (net.Conn, string){
		ProtoConnect: func() (net.Conn, string) {
			c, r := tp.connect(t, fmt.Sprintf("allowed.test:%d", port))
			if c == nil {
				t.Fatalf("CONNECT allowed.test: %s", r.Status)
			}
			return c, ProtoConnect
		},
		ProtoSOCKS5: func() (net.Conn, string) {
			c, rep := tp.socks(t, socksAtypDomain, []byte("allowed.test"), port)
			if rep != socksSucceeded {
				t.Fatalf("SOCKS5 allowed.test: reply %d", rep)
			}
			return c, ProtoSOCKS5
		},
	}
	for _, proto := range []string{ProtoConnect, ProtoSOCKS5} {
		for _, tt := range []struct {
			name  string
			alert bool
			sni   string
			rule  string // of the event; "" when allowed
		}{
			{"plain ClientHello", false, "allowed.test", ""},
			{"alert, then ClientHello", true, "allowed.test", ""},
			{"alert, then ClientHello for other.test", true, "other.test", "sni mismatch"},
		} {
			c, _ := open[proto]()
			if tt.alert {
				c = &alertFirst{Conn: c}
			}
			tc := tls.Client(c, &tls.Config{ServerName: tt.sni, RootCAs: testRoots()})
			err := tc.Handshake()
			if tt.rule != "" {
				tc.Close()
				e := tp.event(t)
				if err == nil || !strings.Contains(err.Error(), "access denied") {
					t.Errorf("%s %s: handshake error %v, want access denied", proto, tt.name, err)
				}
				wantEvent(t, e, proto, DecisionDeny, tt.rule)
				if e.SNI != tt.sni {
					t.Errorf("%s %s: event %+v", proto, tt.name, e)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s %s: handshake: %v", proto, tt.name, err)
				tc.Close()
				tp.event(t)
				continue
			}
			if got := httpOver(t, tc, tt.sni); got != "server name "+tt.sni {
				t.Errorf("%s %s: the server answered %q", proto, tt.name, got)
			}
			tc.Close()
			e := tp.event(t)
			wantEvent(t, e, proto, DecisionAllow, "allowed.test")
			if e.SNI != tt.sni {
				t.Errorf("%s %s: event %+v", proto, tt.name, e)
			}
		}
	}
	// The server saw the names of the allowed handshakes only.
	var seen []string
	for len(names) > 0 {
		seen = append(seen, <-names)
	}
	if want := strings.Repeat("allowed.test ", 4); strings.Join(seen, " ")+" " != want {
		t.Errorf("names the server saw: %q, want four allowed.test", seen)
	}
}

// opensslServer runs `openssl s_server` on a loopback port, with the
// test certificate, and returns the port; the test is skipped where
// there is no openssl.
func opensslServer(t *testing.T) int {
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("no openssl:", err)
	}
	dir := t.TempDir()
	cert := testCert()
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
	// s_server takes no port 0: take a free one, and wait for it to listen.
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "s_server", "-accept", fmt.Sprintf("127.0.0.1:%d", port),
		"-cert", certFile, "-key", keyFile, "-quiet")
	cmd.Stdin = strings.NewReader("")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return port
		}
		if i == 100 {
			t.Fatalf("openssl s_server does not listen: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ccsFirst sends an empty change_cipher_spec record, which OpenSSL's
// servers skip, before the first bytes written to it.
type ccsFirst struct {
	net.Conn
	sent bool
}

func (c *ccsFirst) Write(b []byte) (int, error) {
	if c.sent {
		return c.Conn.Write(b)
	}
	c.sent = true
	if _, err := c.Conn.Write(append([]byte("\x14\x03\x01\x00\x00"), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// TestTunnelEmptyCCSBeforeClientHello: an empty change_cipher_spec
// record before the ClientHello, which OpenSSL's servers skip, does not
// hide the ClientHello's server name from the tunnel's check. The
// controls: with OpenSSL's s_server behind the proxy, the plain
// ClientHello and the prefixed one naming the target both complete a
// handshake, so the server skips the record the proxy passed on.
func TestTunnelEmptyCCSBeforeClientHello(t *testing.T) {
	port := opensslServer(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
	for _, tt := range []struct {
		name   string
		prefix bool
		sni    string
		rule   string // of the event; "" when allowed
	}{
		{"plain ClientHello", false, "allowed.test", ""},
		{"empty change_cipher_spec, then ClientHello", true, "allowed.test", ""},
		{"empty change_cipher_spec, then ClientHello for other.test", true, "other.test", "sni mismatch"},
	} {
		c, r := tp.connect(t, fmt.Sprintf("allowed.test:%d", port))
		if c == nil {
			t.Fatalf("CONNECT allowed.test: %s", r.Status)
		}
		if tt.prefix {
			c = &ccsFirst{Conn: c}
		}
		tc := tls.Client(c, &tls.Config{ServerName: tt.sni, RootCAs: testRoots()})
		err := tc.Handshake()
		tc.Close()
		e := tp.event(t)
		if tt.rule != "" {
			if err == nil || !strings.Contains(err.Error(), "access denied") {
				t.Errorf("%s: handshake error %v, want access denied", tt.name, err)
			}
			wantEvent(t, e, ProtoConnect, DecisionDeny, tt.rule)
		} else {
			if err != nil {
				t.Errorf("%s: handshake: %v", tt.name, err)
			}
			wantEvent(t, e, ProtoConnect, DecisionAllow, "allowed.test")
		}
		if e.SNI != tt.sni {
			t.Errorf("%s: event %+v", tt.name, e)
		}
	}
}
