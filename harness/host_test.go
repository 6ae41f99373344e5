package harness

import "testing"

func TestDecideHost(t *testing.T) {
	rs := New(mustPolicy(t, `
[[rules]]
name = "stripe-writes"
match = { host = "api.stripe.com", method = "POST" }
decision = "ask"
reason = "payments"

[[rules]]
name = "no-uploads"
match = { host = "*.example.com", port = 443, path = "/upload/*" }
decision = "deny"

[[rules]]
name = "gets-fine"
match = { host = "docs.example.com", method = "GET" }
decision = "allow"

[[rules]]
name = "model"
match = { host = "api.openai.com" }
decision = "ask"
`))
	tests := []struct {
		q       Request
		verdict Verdict
		rule    string
	}{
		{Request{Host: "api.stripe.com", Port: 443}, Ask, "stripe-writes"}, // a tunnel: the method is unseen
		{Request{Host: "api.stripe.com", Port: 80, Method: "POST", Path: "/v1/charges"}, Ask, "stripe-writes"},
		{Request{Host: "api.stripe.com", Port: 80, Method: "GET", Path: "/v1/charges"}, Allow, ""},
		// A server reads "post" as POST, and a method-override header as
		// the method: a rule that asks matches either (the lower-case
		// method passed the rule, tried).
		{Request{Host: "api.stripe.com", Port: 80, Method: "post", Path: "/v1/charges"}, Ask, "stripe-writes"},
		{Request{Host: "api.stripe.com", Port: 80, Method: "Post", Path: "/v1/charges"}, Ask, "stripe-writes"},
		{Request{Host: "api.stripe.com", Port: 80, Method: "GET", Path: "/v1/charges", MethodOverrides: []string{" post"}}, Ask, "stripe-writes"},
		{Request{Host: "api.stripe.com", Port: 80, Method: "GET", Path: "/v1/charges", MethodOverrides: []string{"PATCH"}}, Allow, ""},
		{Request{Host: "a.example.com", Port: 443}, Deny, "no-uploads"},
		// A tunnel whose requests the proxy reads (a secret's host) leaves
		// the rules narrowed by method or path to them.
		{Request{Host: "a.example.com", Port: 443, Intercepted: true}, Allow, ""},
		{Request{Host: "api.openai.com", Port: 443, Intercepted: true}, Ask, "model"},
		// Its requests: the host's own rule was decided with the tunnel.
		{Request{Host: "api.openai.com", Port: 443, Method: "GET", Path: "/", Intercepted: true}, Allow, ""},
		{Request{Host: "a.example.com", Port: 443, Method: "GET", Path: "/upload/x", Intercepted: true}, Deny, "no-uploads"},
		{Request{Host: "example.com", Port: 443}, Allow, ""},
		{Request{Host: "a.example.com", Port: 80, Method: "PUT", Path: "/upload/x"}, Allow, ""},
		{Request{Host: "docs.example.com", Port: 443}, Deny, "no-uploads"}, // the allow for GET does not open a tunnel
		{Request{Host: "docs.example.com", Port: 80, Method: "GET", Path: "/"}, Allow, "gets-fine"},
		// An allow matches the method as sent, with no override naming
		// another.
		{Request{Host: "docs.example.com", Port: 80, Method: "get", Path: "/"}, Allow, ""},
		{Request{Host: "docs.example.com", Port: 80, Method: "GET", Path: "/", MethodOverrides: []string{"DELETE"}}, Allow, ""},
		{Request{Host: "docs.example.com", Port: 80, Method: "GET", Path: "/", MethodOverrides: []string{"get"}}, Allow, "gets-fine"},
		// A path-override header names the path some servers serve: a
		// deny matches if it or the path does, an allow only if both.
		{Request{Host: "a.example.com", Port: 443, Method: "GET", Path: "/x", PathOverrides: []string{"/upload/y?z=1"}}, Deny, "no-uploads"},
		{Request{Host: "a.example.com", Port: 443, Method: "GET", Path: "/x", PathOverrides: []string{"/other"}}, Allow, ""},
		{Request{Host: "api.openai.com", Port: 443}, Ask, "model"},
		{Request{Host: "xapi.openai.com", Port: 443}, Allow, ""},
	}
	for _, tt := range tests {
		d := rs.DecideHost(tt.q)
		rule := ""
		if d.Rule != nil {
			rule = d.Rule.Name
		}
		if d.Verdict != tt.verdict || rule != tt.rule {
			t.Errorf("DecideHost(%+v) = %s by %q, want %s by %q", tt.q, d.Verdict, rule, tt.verdict, tt.rule)
		}
	}
	if !rs.HasHostRules() {
		t.Error("HasHostRules is false")
	}
}

// TestHostAllowPathOverride: an allow narrowed by path matches a request
// only when every path-override header names a path it allows too. The
// control: the same request without the header is allowed by the rule.
func TestHostAllowPathOverride(t *testing.T) {
	rs := New(mustPolicy(t, `
[[rules]]
name = "reads"
match = { host = "api.test", path = "/v1/**" }
decision = "allow"
`))
	for _, tc := range []struct {
		overrides []string
		rule      string
	}{
		{nil, "reads"},
		{[]string{"/v1/x"}, "reads"},
		{[]string{"/admin"}, ""},
	} {
		d := rs.DecideHost(Request{Host: "api.test", Port: 80, Method: "GET", Path: "/v1/items", PathOverrides: tc.overrides})
		if rule := ""; d.Rule != nil && d.Rule.Name != tc.rule || d.Rule == nil && tc.rule != rule {
			t.Errorf("overrides %v: %+v, want rule %s", tc.overrides, d, tc.rule)
		}
	}
}
