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
	other := captureClientHello(t, "other.test")
	const alert = "\x15\x03\x01\x00\x02\x01\x70" // warning: unrecognized_name
	const ccs = "\x14\x03\x01\x00\x00"           // change_cipher_spec, empty
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
		// crypto/tls's servers skip warning alerts before the
		// ClientHello, so the reader does too, and checks the
		// ClientHello behind them.
		{"warning alert, then ClientHello", alert + string(h) + "after", true, "allowed.test", len(alert) + len(h), false},
		{"other.test behind an alert", alert + string(other), true, "other.test", -1, false},
		{"alerts, then split ClientHello", strings.Repeat(alert, 3) + split, true, "allowed.test", -1, false},
		{"alert of Go's servers' version", "\x15\x00\x00\x00\x02\x01\x70" + string(h), true, "allowed.test", -1, false},
		{"as many alerts as crypto/tls skips", strings.Repeat(alert, maxSkippedRecords) + string(h), true, "allowed.test", -1, false},
		{"too many alerts", strings.Repeat(alert, maxSkippedRecords+1) + string(h), true, "", 7*maxSkippedRecords + 1, true},
		// A server ends the handshake at a close_notify: what follows is
		// checked all the same.
		{"close_notify, then ClientHello", "\x15\x03\x01\x00\x02\x01\x00" + string(other), true, "other.test", -1, false},
		// OpenSSL skips empty change_cipher_spec records.
		{"empty change_cipher_spec, then ClientHello", ccs + string(h) + "after", true, "allowed.test", len(ccs) + len(h), false},
		{"other.test behind an empty change_cipher_spec", ccs + string(other), true, "other.test", -1, false},
		{"both, then other.test", ccs + alert + ccs + string(other), true, "other.test", -1, false},
		{"empty change_cipher_spec of version 3.255", "\x14\x03\xff\x00\x00" + string(h), true, "allowed.test", -1, false},
		{"empty change_cipher_spec, then empty record", ccs + "\x16\x03\x01\x00\x00" + string(h), true, "", 11, true},
		{"too many records", strings.Repeat(ccs, maxSkippedRecords) + alert + string(h), true, "", 5*maxSkippedRecords + 1, true},
		{"alert, then not a ClientHello", alert + "\x16\x03\x01\x00\x04\x02\x00\x00\x00", true, "", 13, true},
		{"alert, then empty record", alert + "\x16\x03\x01\x00\x00" + string(h), true, "", 13, true},
		{"alert, then other protocol", alert + "SSH-2.0-x\r\n", true, "", 13, true},
		{"alert, then fatal alert", alert + "\x15\x03\x01\x00\x02\x02\x28" + string(h), true, "", 13, true},
		{"alert alone", alert, true, "", -1, true},
		{"alert cut short", alert[:4], true, "", -1, true},
		// No server skips these: another protocol's bytes, read only as
		// far as they match a record that servers skip.
		{"fatal alert", "\x15\x03\x01\x00\x02\x02\x28" + string(h), false, "", 6, false},
		{"alert of another length", "\x15\x03\x01\x00\x03\x01\x70\x00" + string(h), false, "", 5, false},
		{"alert of version 16.0", "\x15\x10\x00\x00\x02\x01\x70" + string(h), false, "", 2, false},
		{"alert type, then other bytes", "\x15SSH-2.0-x\r\n", false, "", 2, false},
		{"change_cipher_spec, then ClientHello", "\x14\x03\x01\x00\x01\x01" + string(h), false, "", 5, false},
		{"empty application data, then ClientHello", "\x17\x03\x01\x00\x00" + string(h), false, "", 1, false},
		{"heartbeat, then ClientHello", "\x18\x03\x01\x00\x03\x01\x00\x00" + string(h), false, "", 1, false},
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
