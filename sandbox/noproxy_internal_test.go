package sandbox

import "testing"

// TestNoProxyLeavesAllowedLoopback: a loopback name the allowlist names
// goes through the proxy (to the host's loopback, where allow_cidrs lets
// it); the others stay direct, to the sandbox's own loopback.
func TestNoProxyLeavesAllowedLoopback(t *testing.T) {
	for _, tc := range []struct {
		allow []string
		want  string
	}{
		{nil, "localhost,127.0.0.1,::1"},
		{[]string{"pypi.org", "localhost.example"}, "localhost,127.0.0.1,::1"},
		{[]string{"LocalHost:8080"}, "127.0.0.1,::1"},
		{[]string{"127.0.0.1"}, "localhost,::1"},
		{[]string{"[::1]:9000", "localhost"}, "127.0.0.1"},
	} {
		env := proxyEnv(tc.allow)
		if env["NO_PROXY"] != tc.want || env["no_proxy"] != tc.want {
			t.Errorf("allow %q: NO_PROXY %q no_proxy %q, want %q", tc.allow, env["NO_PROXY"], env["no_proxy"], tc.want)
		}
	}
}
