package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestHostRulesNeedTheProxy: host rules and the request and network
// budgets are enforced by the egress proxy, which network mode "host"
// does not use: a policy with them in that mode is refused before
// anything runs, rather than run with them unenforced. Positive control:
// the same command in host mode without them reaches the host's
// loopback listener.
func TestHostRulesNeedTheProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	reached := make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			reached <- struct{}{}
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", port)
	for _, tc := range []struct {
		name, extra string
		refused     bool
	}{
		{"host rule", "[[rules]]\nname = \"no-local\"\nmatch = { host = \"localhost\" }\ndecision = \"deny\"\n", true},
		{"requests budget", "[budgets]\nrequests = { \"localhost\" = 1 }\n", true},
		{"network budget", "[budgets]\nnetwork = \"1KB\"\n", true},
		{"neither", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			p, err := policy.Parse("p.toml", []byte("[network]\nmode = \"host\"\n"+tc.extra))
			if err != nil {
				if tc.refused && strings.Contains(err.Error(), "network.mode") {
					return // refused as the policy loads: as good
				}
				t.Fatal(err)
			}
			p.Workspace.Path = ws
			if err := p.Resolve(ws, t.TempDir()); err != nil {
				if tc.refused && strings.Contains(err.Error(), "network.mode") {
					return
				}
				t.Fatal(err)
			}
			var out bytes.Buffer
			_, err = sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"bash", "-c", script}},
				backend.Stdio{Stdout: &out, Stderr: &out})
			got := false
			select {
			case <-reached:
				got = true
			case <-time.After(200 * time.Millisecond):
			}
			if tc.refused && (err == nil || got || !strings.Contains(err.Error(), "network.mode")) {
				t.Errorf("ran with the proxy's rules unenforced: error %v, reached the host's listener %v, output %q", err, got, out.String())
			}
			if !tc.refused && (err != nil || !got) {
				t.Errorf("control: error %v, reached %v, output %q", err, got, out.String())
			}
		})
	}
}
