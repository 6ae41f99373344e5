package egress

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestSecretInQuery: a secret with a query parameter takes the
// placeholder as that parameter's whole value on a request it is for,
// and the rest of the query goes as sent; its echo, percent-encoded as
// the proxy sent it, comes back as the placeholder. The same placeholder in another parameter, in the path,
// to a host or a path the secret is not for, or of a secret that takes no
// query parameter, is refused, and the server gets nothing. The positive
// controls: the first request, and one without a placeholder to the
// same host.
func TestSecretInQuery(t *testing.T) {
	log := new(echoLog)
	port := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, log.add("query="+r.URL.RawQuery+" path="+r.URL.EscapedPath()))
	})

	secs, err := NewSecrets([]Secret{
		{Name: "MAPS", Placeholder: NewPlaceholder("MAPS"), Value: "real/key+1", Hosts: []string{"allowed.test"}, Paths: []string{"/api"}, Query: "key"},
		{Name: "TOKEN", Placeholder: NewPlaceholder("TOKEN"), Value: "real-token-2", Hosts: []string{"allowed.test"}},
		{Name: "OTHER", Placeholder: NewPlaceholder("OTHER"), Value: "real-3", Hosts: []string{"other.test"}},
	}, testRoots())
	if err != nil {
		t.Fatal(err)
	}
	tp := newProxy(t, mustRules(t, []string{"allowed.test", "other.test"}, nil, loopbackCIDR))
	tp.Secrets = secs
	c := moatClient(tp, secs)
	maps, tok := secs.list[0].Placeholder, secs.list[1].Placeholder
	base := fmt.Sprintf("https://allowed.test:%d", port)

	code, body, err := fetch(t, c, "GET", base+"/api/geo?a=%2F1&key="+maps+"&b=x;y", nil)
	if sent := log.last(); err != nil || code != 200 || sent != "query=a=%2F1&key=real%2Fkey%2B1&b=x;y path=/api/geo" {
		t.Fatalf("the query parameter: %d %q %v, the server got %q", code, body, err, sent)
	}
	if want := "query=a=%2F1&key=" + maps + "&b=x;y path=/api/geo"; body != want {
		t.Errorf("the echo: %q", body)
	}
	if e := tp.nextOf(t, ProtoIntercepted); e.Decision != DecisionAllow || len(e.Secrets) != 1 || e.Secrets[0] != "MAPS" || e.Path != "/api/geo" {
		t.Errorf("event %+v", e)
	}

	n := len(log.sent)
	for _, u := range []string{
		base + "/api/geo?q=" + maps,                                     // another parameter
		base + "/api/geo?key=x" + maps,                                  // not the whole value
		base + "/api/" + maps + "?key=" + maps,                          // in the path
		base + "/elsewhere?key=" + maps,                                 // outside the secret's paths
		base + "/api/geo?key=" + tok,                                    // a secret that takes no query
		fmt.Sprintf("https://other.test:%d/api/geo?key=%s", port, maps), // another host
	} {
		code, body, err := fetch(t, c, "GET", u, nil)
		if err != nil || code != 403 || !strings.Contains(body, "placeholder") {
			t.Errorf("%s: %d %q %v, want 403", u, code, body, err)
		}
	}
	if len(log.sent) != n {
		t.Errorf("the server got refused requests: %q", log.sent[n:])
	}
	if code, _, err := fetch(t, c, "GET", base+"/api/geo?key=mine", nil); err != nil || code != 200 || log.last() != "query=key=mine path=/api/geo" {
		t.Errorf("a query without a placeholder: %d %v %q", code, err, log.last())
	}

	if _, err := NewSecrets([]Secret{{Name: "X", Placeholder: NewPlaceholder("X"), Value: "v", Hosts: []string{"a.test"}, Query: "key", Header: "X-Key: {value}"}}, nil); err == nil {
		t.Error("a secret with both a query parameter and a header template")
	}
}

// TestSecretQuotedFormScrubbed: a value that Go's %q escapes (a quote, a
// backslash, a control, a byte that is not UTF-8), in the error text
// net/http makes of a malformed status line that echoes it, becomes the
// placeholder as the plain value does (found by a tester); the control:
// the plain value.
func TestSecretQuotedFormScrubbed(t *testing.T) {
	for _, v := range []string{`Sup3r"Secret\Val`, "tab\there", "caf\xe9-raw", "ünï-cødé"} {
		secs, err := NewSecrets([]Secret{{Name: "T", Placeholder: NewPlaceholder("T"), Value: v, Hosts: []string{"allowed.test"}}}, testRoots())
		if err != nil {
			t.Fatal(err)
		}
		ph := secs.list[0].Placeholder
		for _, text := range []string{
			fmt.Sprintf("malformed HTTP status code %q", v),
			fmt.Sprintf("%+q", v),
			"plain " + v,
		} {
			got := secs.ScrubText(text)
			if !strings.Contains(got, ph) || strings.Contains(got, v) {
				t.Errorf("%q: scrubbed to %q", text, got)
			}
		}
	}
}
