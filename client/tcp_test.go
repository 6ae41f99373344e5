package client

import "testing"

// TestTCPBase: MOAT_HOST as host:port, or as the URL people paste.
func TestTCPBase(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:7781":         "http://127.0.0.1:7781",
		"http://127.0.0.1:7781":  "http://127.0.0.1:7781",
		"http://127.0.0.1:7781/": "http://127.0.0.1:7781",
		"https://moat.example/":  "https://moat.example",
	} {
		if got := TCP(in, "").base; got != want {
			t.Errorf("%s: base %s, want %s", in, got, want)
		}
	}
}
