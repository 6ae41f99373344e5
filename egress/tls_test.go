package egress

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadClientHello(t *testing.T) {
	h := captureClientHello(t, "allowed.test")
	n := len(h) - 7
	split := string(h[:3]) + "\x00\x02" + string(h[5:7]) + string(h[:3]) + string([]byte{byte(n >> 8), byte(n)}) + string(h[7:])
	tests := []struct {
		name, in string
		isTLS    bool
		sni      string
		read     int // bytes consumed; -1 means all of in
		err      bool
	}{
		{"crypto/tls", string(h) + "after", true, "allowed.test", len(h), false},
		{"split over two records", split + "after", true, "allowed.test", len(split), false},
		{"no SNI", string(captureClientHello(t, "")), true, "", -1, false},
		{"not TLS", "SSH-2.0-x\r\n", false, "", 1, false},
		{"truncated", string(h[:len(h)-1]), true, "", -1, true},
		{"record too large", "\x16\x03\x01\x40\x01\x01", true, "", 6, true},
		{"bad version", "\x16\x09\x01\x00\x01\x01", true, "", 6, true},
		{"Go's servers' version", string(h[:1]) + "\x00\x01" + string(h[3:]), true, "", 6, true},
		{"bad version in the second record", "\x16\x03\x01\x00\x04\x01\x00\x01\x00\x16\x09\x01\x00\x01\x01", true, "", 14, true},
		{"empty record", "\x16\x03\x01\x00\x00" + string(h), true, "", 5, true},
		{"handshake type alone", "\x16", true, "", -1, true},
		// No server acts on a handshake that starts with another
		// message: the bytes of another protocol, which the reader
		// passes on after the record's header and first byte.
		{"not a ClientHello", "\x16\x03\x01\x00\x04\x02\x00\x00\x00", false, "", 6, false},
		{"handshake type, then random bytes", "\x16\x00\xff\xff\x07\x5a\x01", false, "", 6, false},
		{"alert between records", "\x16\x03\x01\x00\x02\x01\x00\x15\x03\x01", true, "", 8, true},
		{"ClientHello too large", "\x16\x03\x01\x00\x04\x01\x01\x00\x01", true, "", -1, true},
	}
	for _, tt := range tests {
		r := strings.NewReader(tt.in)
		raw, got, err := readClientHello(r)
		want := tt.read
		if want < 0 {
			want = len(tt.in)
		}
		if (err != nil) != tt.err || got.isTLS != tt.isTLS || got.sni != tt.sni || len(raw) != want ||
			!bytes.Equal(raw, []byte(tt.in[:len(raw)])) {
			t.Errorf("%s: raw %d bytes (want %d), %+v, %v", tt.name, len(raw), want, got, err)
		}
		if err != nil && !errors.Is(err, errNotHello) {
			t.Errorf("%s: error %v is not errNotHello", tt.name, err)
		}
	}
}

// TestReadClientHelloNames: what the reader makes of the server name,
// in ClientHellos that differ from crypto/tls's own only there.
func TestReadClientHelloNames(t *testing.T) {
	h := captureClientHello(t, "allowed.test")
	for _, tt := range []struct {
		name, sni string
		want      string
		err       bool
	}{
		{"upper case", "ALLOWED.test", "allowed.test", false},
		{"underscore", "allowed_test", "allowed_test", false},
		{"not a host name", "allowed/test", "", true},
		{"trailing dot", "allowed.tes.", "", true}, // RFC 6066 3; crypto/tls refuses it
	} {
		in := bytes.Replace(h, []byte("allowed.test"), []byte(tt.sni), 1)
		raw, got, err := readClientHello(bytes.NewReader(in))
		if (err != nil) != tt.err || got.sni != tt.want || got.hasSNI != (tt.want != "") || !bytes.Equal(raw, in) {
			t.Errorf("%s: %+v, %v; want %q", tt.name, got, err, tt.want)
		}
		if err != nil && !errors.Is(err, errNotHello) {
			t.Errorf("%s: error %v is not errNotHello", tt.name, err)
		}
	}
}

// TestReadClientHelloOfOtherClients: first flights of OpenSSL 3.0's
// s_client and of curl 7.88 (TLS 1.3, and TLS 1.2 only), captured on
// loopback with -servername / --resolve allowed.test.
func TestReadClientHelloOfOtherClients(t *testing.T) {
	files, _ := filepath.Glob("testdata/hello/*.bin")
	if len(files) == 0 {
		t.Fatal("no captured ClientHellos")
	}
	for _, f := range files {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		raw, h, err := readClientHello(bytes.NewReader(in))
		if err != nil || !h.isTLS || h.sni != "allowed.test" || !bytes.Equal(raw, in) {
			t.Errorf("%s: %d of %d bytes, %+v, %v", f, len(raw), len(in), h, err)
		}
	}
}

// TestReadClientHelloECH: with Encrypted Client Hello the name the proxy
// sees, and checks against the CONNECT target, is the outer one (the
// ECH configuration's public name); the inner name stays encrypted. The
// proxy holds no ECH keys, so it cannot and does not decrypt it.
func TestReadClientHelloECH(t *testing.T) {
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u16 := func(b []byte, v int) []byte { return append(b, byte(v>>8), byte(v)) }
	// An ECHConfig (version 0xfe0d): config id, KEM X25519, the public key,
	// one suite (HKDF-SHA256, AES-128-GCM), max name length, public name,
	// no extensions.
	var c []byte
	c = append(c, 7)
	c = u16(c, 0x0020)
	c = append(u16(c, 32), key.PublicKey().Bytes()...)
	c = u16(u16(u16(c, 4), 1), 1)
	c = append(c, 32)
	c = append(append(c, byte(len("public.test"))), "public.test"...)
	c = u16(c, 0)
	cfg := append(u16(u16(nil, 0xfe0d), len(c)), c...)
	list := append(u16(nil, len(cfg)), cfg...)

	cl, srv := net.Pipe()
	go func() {
		tc := tls.Client(cl, &tls.Config{ServerName: "inner.test", MinVersion: tls.VersionTLS13, EncryptedClientHelloConfigList: list})
		tc.Handshake()
		cl.Close()
	}()
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	raw, h, err := readClientHello(srv)
	srv.Close()
	if err != nil || h.sni != "public.test" {
		t.Fatalf("ECH ClientHello: %+v, %v", h, err)
	}
	if bytes.Contains(raw, []byte("inner.test")) {
		t.Fatal("the inner name is in the clear")
	}
}
