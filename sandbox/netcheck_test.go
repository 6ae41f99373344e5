//go:build linux

package sandbox_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestNetworkAsk: a host rule with decision ask holds a request to that
// host in the proxy until the approver answers: approved, it goes through
// (plain HTTP and a CONNECT tunnel alike); refused, unanswered or with
// nobody to ask, the command gets a 403 naming the rule. A session
// approval lets later requests through unasked; an approved request
// whose record cannot be written is refused. Positive control: a host no
// rule names is reached without asking.
func TestNetworkAsk(t *testing.T) {
	for _, tt := range []struct {
		name    string
		ap      sandbox.Approver
		through bool
		asked   int
		outcome string
		audit   error // what recording a decision returns
	}{
		{"approved", &syncApprover{yes: true}, true, 2, sandbox.ApprovalApproved, nil},
		{"session", &scopedApprover{scope: harness.ScopeSession}, true, 1, sandbox.ApprovalApproved, nil},
		{"refused", &syncApprover{}, false, 2, sandbox.ApprovalDenied, nil},
		{"timeout", &scopedApprover{wait: true}, false, 2, sandbox.ApprovalTimeout, nil},
		{"no approver", nil, false, 0, sandbox.ApprovalNoApprover, nil},
		{"approved, unrecorded", &syncApprover{yes: true}, false, 2, sandbox.ApprovalApproved, errors.New("write audit stream: no space left on device")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newNetWorld(t)
			w.names["other.test"] = netip.MustParseAddr("127.0.0.1")
			var mu sync.Mutex
			var recs []audit.Decision
			req := w.request(func(p *policy.Policy) {
				p.Network.Allow = []string{"allowed.test", "other.test"}
				p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
				p.Rules = []policy.Rule{{Name: "ask-allowed", Match: policy.Match{Host: "allowed.test"}, Decision: policy.DecisionAsk, Reason: "the test wants to be asked"}}
				p.Harness.AskTimeout = policy.Duration(300e6)
			})
			req.AuditDecision = func(d audit.Decision) error { mu.Lock(); recs = append(recs, d); mu.Unlock(); return tt.audit }
			if tt.ap != nil {
				req.Approver = tt.ap
			}
			out, _ := w.run(t, req, fmt.Sprintf(`
echo "http: $(curl -sS -m 10 -D - http://allowed.test:%[1]d/ | tr -d '\r' | grep -e '^HTTP' -e '^X-Moat-Denied' -e PAGE | tr '\n' ' ')"
echo "https: $(curl -sS -m 10 -k https://allowed.test:%[2]d/ 2>&1)"
echo "control: $(curl -sS -m 10 http://other.test:%[1]d/)"
`, w.httpPort, w.httpsPort))
			if !strings.Contains(out, "control: PAGE-FROM-other.test") {
				t.Errorf("the host no rule names was not reached:\n%s", out)
			}
			if tt.through {
				for _, want := range []string{"http: HTTP/1.1 200 OK PAGE-FROM-allowed.test", "https: PAGE-FROM-allowed.test"} {
					if !strings.Contains(out, want) {
						t.Errorf("output lacks %q:\n%s", want, out)
					}
				}
			} else {
				for _, want := range []string{"http: HTTP/1.1 403 Forbidden X-Moat-Denied: ask-allowed", "https: curl: (56) CONNECT tunnel failed, response 403"} {
					if !strings.Contains(out, want) {
						t.Errorf("output lacks %q:\n%s", want, out)
					}
				}
			}
			var asked int
			switch a := tt.ap.(type) {
			case *syncApprover:
				asked = len(a.asked)
			case *scopedApprover:
				asked = len(a.asked)
			}
			if asked != tt.asked {
				t.Errorf("asked %d times, want %d", asked, tt.asked)
			}
			mu.Lock()
			defer mu.Unlock()
			var n int
			for _, r := range recs {
				if r.At != "network" {
					continue
				}
				n++
				if r.Outcome != tt.outcome || !strings.Contains(r.Rule, "ask-allowed") || r.Verdict != "ask" {
					t.Errorf("record %+v, want outcome %q", r, tt.outcome)
				}
			}
			if n != 2 {
				t.Errorf("%d network decision records, want 2: %+v", n, recs)
			}
		})
	}
}

// TestNetworkAllowRuleRecorded: a request a host rule allows is recorded
// (the rule, the destination), and refused when its record cannot be
// written, as the command line's allow is: nothing a rule decides goes
// unrecorded (found by a tester: the allow returned before its record).
// The control: a host no rule names is reached, unrecorded, either way.
func TestNetworkAllowRuleRecorded(t *testing.T) {
	for _, fail := range []bool{false, true} {
		w := newNetWorld(t)
		w.names["other.test"] = netip.MustParseAddr("127.0.0.1")
		var mu sync.Mutex
		var recs []audit.Decision
		req := w.request(func(p *policy.Policy) {
			p.Network.Allow = []string{"allowed.test", "other.test"}
			p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
			p.Rules = []policy.Rule{{Name: "allow-allowed", Match: policy.Match{Host: "allowed.test"}, Decision: policy.DecisionAllow}}
		})
		req.AuditDecision = func(d audit.Decision) error {
			mu.Lock()
			defer mu.Unlock()
			if d.At == "network" {
				recs = append(recs, d)
				if fail {
					return errors.New("write audit stream: no space left on device")
				}
			}
			return nil
		}
		out, _ := w.run(t, req, fmt.Sprintf(`
echo "http: $(curl -sS -m 10 -D - http://allowed.test:%[1]d/ | tr -d '\r' | grep -e '^HTTP' -e PAGE | tr '\n' ' ')"
echo "control: $(curl -sS -m 10 http://other.test:%[1]d/)"
`, w.httpPort))
		if !strings.Contains(out, "control: PAGE-FROM-other.test") {
			t.Errorf("audit failing %v: the host no rule names was not reached:\n%s", fail, out)
		}
		want := "http: HTTP/1.1 200 OK PAGE-FROM-allowed.test"
		if fail {
			want = "http: HTTP/1.1 403 Forbidden"
		}
		if !strings.Contains(out, want) {
			t.Errorf("audit failing %v: output lacks %q:\n%s", fail, want, out)
		}
		mu.Lock()
		if len(recs) != 1 || recs[0].Verdict != "allow" || !strings.Contains(recs[0].Rule, "allow-allowed") || !strings.Contains(strings.Join(recs[0].Command, " "), "allowed.test") {
			t.Errorf("audit failing %v: network records %+v, want one allow of allowed.test", fail, recs)
		}
		mu.Unlock()
	}
}
