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
