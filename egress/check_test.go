package egress

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestCheckHook: Proxy.Check is asked about every destination the Rules
// allow, on each front end, with the method and path where the proxy sees
// them; its refusal is answered like the proxy's own (403 naming the rule,
// SOCKS5 "not allowed") and audited. Positive control: what it allows is
// reached on each front end.
func TestCheckHook(t *testing.T) {
	s := startServers(t)
	var mu sync.Mutex
	var asked []Query
	tp := newProxy(t, mustRules(t, []string{"allowed.test", "other.test"}, nil, []string{"127.0.0.0/8"}), func(tp *testProxy) {
		tp.Check = func(_ context.Context, q Query) Verdict {
			mu.Lock()
			asked = append(asked, q)
			mu.Unlock()
			if q.Host == "other.test" {
				return Verdict{Rule: "test-check", Reason: "the check refuses other.test"}
			}
			return Verdict{Allow: true}
		}
	})

	// Plain HTTP, forwarded: allowed, then refused.
	resp, _ := tp.get(t, fmt.Sprintf("http://allowed.test:%d/p", s.httpPort), fmt.Sprintf("allowed.test:%d", s.httpPort))
	if resp.StatusCode != http.StatusOK {
		t.Errorf("allowed forward: %s", resp.Status)
	}
	tp.event(t)
	resp, _ = tp.get(t, fmt.Sprintf("http://other.test:%d/p", s.httpPort), fmt.Sprintf("other.test:%d", s.httpPort))
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Moat-Denied") != "test-check" {
		t.Errorf("refused forward: %s %v", resp.Status, resp.Header)
	}
	wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, "test-check")

	// CONNECT: allowed, then refused.
	c, r := tp.connect(t, fmt.Sprintf("allowed.test:%d", s.httpsPort))
	if r.StatusCode != http.StatusOK {
		t.Fatalf("allowed CONNECT: %s", r.Status)
	}
	c.Close()
	tp.event(t)
	c, r = tp.connect(t, fmt.Sprintf("other.test:%d", s.httpsPort))
	if c != nil || r.StatusCode != http.StatusForbidden || r.Header.Get("X-Moat-Denied") != "test-check" {
		t.Errorf("refused CONNECT: %s %v", r.Status, r.Header)
	}
	wantEvent(t, tp.event(t), ProtoConnect, DecisionDeny, "test-check")

	// SOCKS5: allowed, then refused.
	c, rep := tp.socks(t, socksAtypDomain, []byte("allowed.test"), s.httpPort)
	if rep != 0 {
		t.Errorf("allowed SOCKS5: reply %d", rep)
	}
	if c != nil {
		c.Close()
	}
	tp.event(t)
	if _, rep := tp.socks(t, socksAtypDomain, []byte("other.test"), s.httpPort); rep != socksNotAllowed {
		t.Errorf("refused SOCKS5: reply %d", rep)
	}
	wantEvent(t, tp.event(t), ProtoSOCKS5, DecisionDeny, "test-check")

	// A forwarded request's method-override headers reach the check, which
	// decides by them too (harness: a rule on DELETE matches them).
	tp.raw(t, fmt.Sprintf("GET http://allowed.test:%d/p HTTP/1.1\r\nHost: allowed.test:%d\r\nX-HTTP-Method-Override: DELETE\r\nX-Method-Override: GET, PUT\r\nConnection: close\r\n\r\n", s.httpPort, s.httpPort))
	tp.event(t)

	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 7 || strings.Join(asked[6].MethodOverrides, ",") != "DELETE,GET,PUT" {
		t.Errorf("the check of a request with method overrides was asked %+v", asked[len(asked)-1])
	}
	asked = asked[:6]
	if len(asked) != 6 || asked[0].Method != http.MethodGet || asked[0].Path != "/p" || asked[2].Method != "" || asked[2].Path != "" {
		t.Errorf("Check was asked %+v", asked)
	}
}
