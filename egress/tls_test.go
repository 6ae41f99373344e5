package egress

import (
	"bytes"
	"errors"
	"strings"
	"testing"
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
		{"not a ClientHello", "\x16\x03\x01\x00\x04\x02\x00\x00\x00", true, "", -1, true},
		{"record too large", "\x16\x03\x01\x40\x01", true, "", -1, true},
		{"bad version", "\x16\x09\x01\x00\x01\x01", true, "", 5, true},
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
