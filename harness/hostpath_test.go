package harness

import (
	"strings"
	"testing"
)

// A plain-HTTP request's path reaches the server as it decodes and
// normalises it: a rule that refuses or asks about a path holds for
// every spelling of it. "**" in a rule's path is any number of elements,
// as in a write rule (it was path.Match's, one "*": a deny of "/admin/**"
// let /admin/sub/y through, found by a tester), and "*" is one element.
func TestDecideHostPathSpellings(t *testing.T) {
	rs := New(mustPolicy(t, `
[[rules]]
name = "no-charges"
match = { host = "api.stripe.com", path = "/v1/charges" }
decision = "deny"

[[rules]]
name = "no-admin"
match = { host = "api.test", path = "/admin/**" }
decision = "deny"

[[rules]]
name = "no-top"
match = { host = "api.test", path = "/top/*" }
decision = "deny"
`))
	tests := []struct {
		host, path string
		verdict    Verdict
	}{
		{"api.stripe.com", "/v1/charges", Deny},
		{"api.stripe.com", "/v1/%63harges", Deny},
		{"api.stripe.com", "/v1//charges", Deny},
		{"api.stripe.com", "/v1/x/../charges", Deny},
		{"api.stripe.com", "/v1/./charges", Deny},
		{"api.stripe.com", "/v1/charges/", Deny},
		{"api.stripe.com", "/v1/customers", Allow}, // positive control
		{"api.test", "/admin", Deny},
		{"api.test", "/admin/x", Deny},
		{"api.test", "/admin/sub/y", Deny},
		{"api.test", "/admin/a/b/c/", Deny},
		{"api.test", "/admin/sub/%79", Deny},
		{"api.test", "/top/x", Deny},
		{"api.test", "/top/x/y", Allow},
		{"api.test", "/administrator", Allow},
		{"api.test", "/other/admin/x", Allow},
		// Java servers drop each segment's ";" parameters, IIS and some
		// routers read a backslash as "/", and a front end that decodes before
		// the server decodes again reads %2561 as a (each passed the
		// rule, found by a tester).
		{"api.test", "/admin;x/secret", Deny},
		{"api.test", "/admin;/x", Deny},
		{"api.test", "/;x/admin/y", Deny},
		{"api.test", "/admin%3bx/y", Deny},
		{"api.test", `/admin\x`, Deny},
		{"api.test", "/%5cadmin%5cx", Deny},
		{"api.test", "/%2561dmin/x", Deny},
		{"api.stripe.com", "/v1/charges;jsessionid=1", Deny},
		{"api.stripe.com", "/v1;a/%2563harges%3b", Deny},
		{"api.test", "/ADMIN/x", Deny},
		// A bad escape elsewhere in the path does not stop the decoding
		// of the rest, as lenient servers decode; IIS drops a segment's
		// trailing dots and spaces, C servers stop at a NUL; five steps
		// in a row (each passed the rule, found by a tester).
		{"api.test", "/%2561dmin/%25zz", Deny},
		{"api.test", "/%61dmin/%zz", Deny},
		{"api.test", "/%61dmin/x%", Deny},
		{"api.test", "/admin./x", Deny},
		{"api.test", "/admin%20/x", Deny},
		{"api.test", "/admin%00/x", Deny},
		{"api.test", "/a/..%255cadmin;b/s", Deny},
		{"api.test", "/%41dmin;x/y", Deny},
		{"api.test", "/adm;in/x", Allow}, // the parameter ends the segment: /adm
		{"api.test", "/other;admin/x", Allow},
		{"api.test", "/x%zz/admin", Allow},
		{"api.test", "/adminx./y", Allow},
	}
	for _, tt := range tests {
		if d := rs.DecideHost(Request{Host: tt.host, Port: 80, Method: "POST", Path: tt.path}); d.Verdict != tt.verdict {
			t.Errorf("DecideHost(POST %s%s) = %s, want %s", tt.host, tt.path, d.Verdict, tt.verdict)
		}
	}
}

// TestPathReadingsBounded: a path spelt to have ever more readings
// (escapes within escapes, parameters, backslashes) gets a bounded
// number of them, in count and in bytes, and is marked capped, which a
// rule that refuses matches: a reading past the bound could have been
// the rule's path (fail closed). An ordinary path is not capped.
func TestPathReadingsBounded(t *testing.T) {
	seg := "%25%32%35" + ";a\\b. %00"
	p := "/" + strings.Repeat(seg+"/", 40000)
	r := pathReadings(p)
	size := 0
	for _, v := range r.paths {
		size += len(v)
	}
	if len(r.paths) > maxReadings || size > maxReadingBytes+len(p) {
		t.Errorf("%d readings, %d bytes", len(r.paths), size)
	}
	if !r.capped {
		t.Errorf("%d readings, not capped", len(r.paths))
	}
	if r := pathReadings("/v1/%2563harges;x/"); r.capped || len(r.paths) < 2 {
		t.Errorf("ordinary path: %d readings, capped %v", len(r.paths), r.capped)
	}

	rs := New(mustPolicy(t, `
[[rules]]
name = "no-admin"
match = { host = "api.test", path = "/admin/**" }
decision = "deny"

[[rules]]
name = "get-docs"
match = { host = "docs.test", method = "GET", path = "/docs/**" }
decision = "allow"
`))
	if d := rs.DecideHost(Request{Host: "api.test", Port: 80, Method: "GET", Path: p}); d.Verdict != Deny {
		t.Errorf("capped path: %s, want deny", d.Verdict)
	}
	if d := rs.DecideHost(Request{Host: "api.test", Port: 80, Method: "GET", Path: "/docs/" + seg}); d.Verdict != Allow {
		t.Errorf("uncapped path: %s, want allow (positive control)", d.Verdict)
	}
	if d := rs.DecideHost(Request{Host: "docs.test", Port: 80, Method: "GET", Path: "/docs" + p}); d.Verdict != Allow {
		t.Errorf("allow rule, capped path under it: %s, want allow", d.Verdict)
	}
}
