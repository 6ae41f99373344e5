package harness

import "testing"

// A plain-HTTP request's path reaches the server as it decodes and
// normalises it: a rule that refuses or asks about a path holds for
// every spelling of it.
func TestDecideHostPathSpellings(t *testing.T) {
	rs := New(mustPolicy(t, `
[[rules]]
name = "no-charges"
match = { host = "api.stripe.com", path = "/v1/charges" }
decision = "deny"

`))
	tests := []struct {
		path    string
		verdict Verdict
	}{
		{"/v1/charges", Deny},
		{"/v1/%63harges", Deny},
		{"/v1//charges", Deny},
		{"/v1/x/../charges", Deny},
		{"/v1/./charges", Deny},
		{"/v1/charges/", Deny},
		{"/v1/customers", Allow}, // positive control
	}
	for _, tt := range tests {
		if d := rs.DecideHost(Request{Host: "api.stripe.com", Port: 80, Method: "POST", Path: tt.path}); d.Verdict != tt.verdict {
			t.Errorf("DecideHost(POST %s) = %s, want %s", tt.path, d.Verdict, tt.verdict)
		}
	}
}

// TestDecideHostPathDoubleStar: "**" in a host rule's path is any number
// of elements, as in a write rule (it was path.Match's, one "*": a deny of
// "/admin/**" let /admin/sub/y through, found by a tester), and "*" is one
// element.
func TestDecideHostPathDoubleStar(t *testing.T) {
	rs := New(mustPolicy(t, `
[[rules]]
name = "no-admin"
match = { host = "api.test", path = "/admin/**" }
decision = "deny"

[[rules]]
name = "no-top"
match = { host = "api.test", path = "/top/*" }
decision = "deny"
`))
	for p, want := range map[string]Verdict{
		"/admin": Deny, "/admin/x": Deny, "/admin/sub/y": Deny, "/admin/a/b/c/": Deny, "/admin/sub/%79": Deny,
		"/top/x": Deny, "/top/x/y": Allow, "/administrator": Allow, "/other/admin/x": Allow,
	} {
		if d := rs.DecideHost(Request{Host: "api.test", Port: 80, Method: "GET", Path: p}); d.Verdict != want {
			t.Errorf("DecideHost(GET %s) = %s, want %s", p, d.Verdict, want)
		}
	}
}
