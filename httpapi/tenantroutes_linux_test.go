package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
)

// TestEveryRouteTenantBound: on every route that names a session, a
// process or an approval, another tenant's id gets the answer a missing
// id gets (status, code and message, the id aside): nothing says it
// exists. A credential's role is honoured on every route: a sessions-only
// token gets forbidden on the approvals' routes, an approvals-only one on
// the sessions'. Controls: the owner reaches each object, and each
// role's own routes.
func TestEveryRouteTenantBound(t *testing.T) {
	tf := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tf, []byte(strings.Join([]string{
		httpapi.HashToken("alice", "tok-a"), httpapi.HashToken("bob", "tok-b"),
		httpapi.HashToken("alice", "tok-as") + " sessions", httpapi.HashToken("alice", "tok-ap") + " approvals",
	}, "\n")+"\n"), 0o600)
	tokens, err := httpapi.LoadTokens(tf)
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, daemon.Config{Approvals: true, ApprovalTimeout: time.Minute}, tokens)
	ctx := context.Background()
	alice := client.TCP(d.tcp, "tok-a")
	defer alice.Close()
	s, err := alice.CreateSession(ctx, &client.CreateSessionRequest{Policy: shipPolicy})
	if err != nil {
		t.Fatal(err)
	}
	p, err := alice.Start(ctx, s.ID, &client.ExecRequest{Args: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.WriteFile(ctx, s.ID, "g", []byte("alice's"), 0o644); err != nil {
		t.Fatal(err)
	}
	execAsync(alice, s.ID, "echo", "ship", "it")
	a := waitApproval(t, alice, "echo", "ship", "it")
	do := func(tok, method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+d.tcp+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b)
	}
	const none = "0123456789abcdef"
	type route struct{ method, path, body string }
	// Reads first, so that the owner's control finds everything there.
	routes := []route{
		{"GET", "/v1/sessions/SID", ""},
		{"GET", "/v1/sessions/SID/processes", ""},
		{"GET", "/v1/sessions/SID/processes/PID/output?wait=0", ""},
		{"GET", "/v1/sessions/SID/files/list?path=.", ""},
		{"GET", "/v1/sessions/SID/files/tar?path=.", ""},
		{"GET", "/v1/approvals/AID", ""},
		{"POST", "/v1/sessions/SID/exec", `{"args":["true"]}`},
		{"POST", "/v1/sessions/SID/processes/PID/stdin", `{"data":"x"}`},
		{"PUT", "/v1/sessions/SID/files?path=g", "x"},
		{"GET", "/v1/sessions/SID/files?path=g", ""},
		{"GET", "/v1/sessions/SID/files/stat?path=g", ""},
		{"DELETE", "/v1/sessions/SID/files?path=g", ""},
		{"PUT", "/v1/sessions/SID/files/tar?path=.", ""},
		{"POST", "/v1/sessions/SID/fetch", `{"url":"https://example.invalid/"}`},
		{"GET", "/v1/sessions/SID/diff", ""},
		{"POST", "/v1/sessions/SID/apply", `{}`},
		{"POST", "/v1/sessions/SID/discard", ""},
		{"POST", "/v1/approvals/AID/deny", `{}`},
		{"POST", "/v1/approvals/AID/approve", `{}`},
		{"POST", "/v1/sessions/SID/processes/PID/signal", `{"signal":"TERM"}`},
		{"DELETE", "/v1/sessions/SID", ""},
	}
	for _, rt := range routes {
		theirs := strings.NewReplacer("SID", s.ID, "PID", p.ID, "AID", a.ID).Replace(rt.path)
		missing := strings.NewReplacer("SID", none, "PID", p.ID, "AID", none).Replace(rt.path)
		st1, b1 := do("tok-b", rt.method, theirs, rt.body)
		st2, b2 := do("tok-b", rt.method, missing, rt.body)
		b1 = strings.NewReplacer(s.ID, "ID", a.ID, "ID").Replace(b1)
		b2 = strings.ReplaceAll(b2, none, "ID")
		if st1 != st2 || b1 != b2 || st1 != http.StatusNotFound {
			t.Errorf("%s %s: another tenant's id: %d %s; a missing one: %d %s", rt.method, rt.path, st1, b1, st2, b2)
		}
		approvals := strings.HasPrefix(rt.path, "/v1/approvals")
		wrong := map[bool]string{true: "tok-as", false: "tok-ap"}[approvals]
		if st, b := do(wrong, rt.method, theirs, rt.body); st != http.StatusForbidden || !strings.Contains(b, client.CodeForbidden) {
			t.Errorf("%s %s with the token of the other role: %d %s", rt.method, rt.path, st, b)
		}
		// The owner reaches it (the positive control), with its token of
		// every role and the one of the route's role. Only the reads:
		// the writes would end what the next routes need.
		if rt.method == "GET" && !strings.Contains(rt.path, "/diff") {
			for _, tok := range []string{"tok-a", map[bool]string{true: "tok-ap", false: "tok-as"}[approvals]} {
				if st, b := do(tok, rt.method, theirs, rt.body); st != http.StatusOK {
					t.Errorf("positive control: %s %s as the owner (%s): %d %s", rt.method, rt.path, tok, st, b)
				}
			}
		}
	}
	if _, err := alice.Session(ctx, s.ID); err != nil {
		t.Errorf("another tenant's requests touched alice's session: %v", err)
	}
	if data, err := alice.ReadFile(ctx, s.ID, "g"); err != nil || string(data) != "alice's" {
		t.Errorf("another tenant's requests touched alice's file: %q, %v", data, err)
	}
	if _, err := alice.Approval(ctx, a.ID); err != nil {
		t.Errorf("another tenant's requests answered alice's approval: %v", err)
	}
	// Two credentials in one request: which one a proxy in front meant
	// cannot be told, so neither is taken; each alone reaches.
	req, _ := http.NewRequest("GET", "http://"+d.tcp+"/v1/sessions/"+s.ID, nil)
	req.Header.Add("Authorization", "Bearer tok-a")
	req.Header.Add("Authorization", "Bearer tok-b")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "more than one Authorization header") {
		t.Errorf("two Authorization headers: %d %s", resp.StatusCode, b)
	}
	if st, b := do("tok-a", "GET", "/v1/sessions/"+s.ID, ""); st != http.StatusOK {
		t.Errorf("control: one Authorization header: %d %s", st, b)
	}
}
