//go:build linux

package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
)

const shipPolicy = `
[[rules]]
name = "ship"
match = { command = ["echo", "ship"] }
decision = "ask"
reason = "shipping leaves this machine"
`

type memAudit struct {
	mu   sync.Mutex
	recs []any
}

func (a *memAudit) Write(v any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, v)
	return nil
}

type execResult struct {
	out string
	rep *client.ExitReport
	err error
}

// execAsync runs argv in session id in the background.
func execAsync(c *client.Client, id string, argv ...string) chan execResult {
	ch := make(chan execResult, 1)
	go func() {
		var out bytes.Buffer
		rep, err := c.Exec(context.Background(), id, &client.ExecRequest{Args: argv}, &out, &out)
		ch <- execResult{out.String(), rep, err}
	}()
	return ch
}

// waitApproval waits for the pending approval of argv.
func waitApproval(t *testing.T, c *client.Client, argv ...string) client.Approval {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		list, err := c.Approvals(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range list {
			if slices.Equal(a.Command, argv) {
				return a
			}
		}
	}
	t.Fatalf("no pending approval of %q", argv)
	return client.Approval{}
}

func TestApprovalsThroughTheAPI(t *testing.T) {
	rec := &memAudit{}
	d := startDaemon(t, daemon.Config{Approvals: true, ApprovalTimeout: 30 * time.Second, Audit: rec}, nil)
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{Policy: shipPolicy})

	// An ask waits; approved once, the command runs.
	res := execAsync(d.c, s.ID, "echo", "ship", "it")
	a := waitApproval(t, d.c, "echo", "ship", "it")
	if a.Session != s.ID || !strings.Contains(a.Rule, "ship") || a.Reason != "shipping leaves this machine" || a.Dir == "" || a.Network {
		t.Errorf("approval: %+v", a)
	}
	if got, err := d.c.Approval(ctx, a.ID); err != nil || got.ID != a.ID {
		t.Errorf("get: %+v %v", got, err)
	}
	for _, bad := range []struct {
		req  client.ApproveRequest
		code string
	}{
		{client.ApproveRequest{Scope: "always"}, client.CodeBadRequest},
		{client.ApproveRequest{Scope: "prefix", For: "soon"}, client.CodeBadRequest},
		{client.ApproveRequest{Scope: "prefix", Prefix: []string{"echo", "shipit"}, For: "1m"}, client.CodeApprovalRefused},
		{client.ApproveRequest{Scope: "session", For: "100h"}, client.CodeApprovalRefused},
	} {
		if err := d.c.Approve(ctx, a.ID, &bad.req); apiCode(err) != bad.code {
			t.Errorf("approve %+v: %v, want %s", bad.req, err, bad.code)
		}
	}
	if err := d.c.Approve(ctx, a.ID, &client.ApproveRequest{Why: "release day"}); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil || r.rep.ExitCode != 0 || r.out != "ship it\n" {
		t.Fatalf("approved exec: %+v %v", r.rep, r.err)
	}
	if err := d.c.Approve(ctx, a.ID, &client.ApproveRequest{}); apiCode(err) != client.CodeNotFound || !strings.Contains(err.Error(), "no such approval") {
		t.Errorf("approved twice: %v", err)
	}
	// An unknown id is an approval not found, not a session.
	for what, err := range map[string]error{
		"get":     func() error { _, err := d.c.Approval(ctx, "nosuch"); return err }(),
		"approve": d.c.Approve(ctx, "nosuch", &client.ApproveRequest{}),
		"deny":    d.c.Deny(ctx, "nosuch", &client.DenyRequest{}),
	} {
		if apiCode(err) != client.CodeNotFound || !strings.Contains(err.Error(), `no such approval "nosuch"`) || strings.Contains(err.Error(), "session") {
			t.Errorf("%s of an unknown approval: %v", what, err)
		}
	}

	// Once is once: the same command asks again; denied, it fails with
	// the rule and the reason.
	res = execAsync(d.c, s.ID, "echo", "ship", "it")
	a = waitApproval(t, d.c, "echo", "ship", "it")
	if err := d.c.Deny(ctx, a.ID, &client.DenyRequest{Why: "not today"}); err != nil {
		t.Fatal(err)
	}
	r = <-res
	if r.err != nil || r.rep.Reason != "denied" || r.out != "" || !strings.Contains(r.rep.Error, "ship") || !strings.Contains(r.rep.Error, "not today") {
		t.Fatalf("denied exec: %+v %v", r.rep, r.err)
	}

	// A prefix approval covers what begins with it until it expires.
	res = execAsync(d.c, s.ID, "echo", "ship", "one")
	a = waitApproval(t, d.c, "echo", "ship", "one")
	if err := d.c.Approve(ctx, a.ID, &client.ApproveRequest{Scope: "prefix", Prefix: []string{"echo", "ship"}, For: "1m"}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.out != "ship one\n" {
		t.Fatalf("prefix-approved exec: %+v %v", r.rep, r.err)
	}
	out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"echo", "ship", "two"}})
	if out != "ship two\n" || rep.ExitCode != 0 {
		t.Errorf("covered by the prefix: %q %+v", out, rep)
	}

	rec.mu.Lock()
	var outcomes []string
	for _, r := range rec.recs {
		switch r := r.(type) {
		case audit.Approval:
			outcomes = append(outcomes, "approval "+r.Outcome+" "+r.Scope+" "+r.Why)
		case audit.Decision:
			if strings.HasPrefix(r.Approver, "uid:") {
				r.Approver = "uid" // the daemon's own user, who asked
			}
			outcomes = append(outcomes, "decision "+r.Outcome+" "+r.Approver+" "+r.Scope)
		}
	}
	rec.mu.Unlock()
	want := []string{
		"approval approved once release day", "decision approved api once",
		"approval denied  not today", "decision denied api ",
		"approval approved prefix ", "decision approved api prefix",
		"decision approved uid prefix",
	}
	if strings.Join(outcomes, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit:\n%s\nwant\n%s", strings.Join(outcomes, "\n"), strings.Join(want, "\n"))
	}
}

func TestApprovalTimesOut(t *testing.T) {
	rec := &memAudit{}
	d := startDaemon(t, daemon.Config{Approvals: true, ApprovalTimeout: 300 * time.Millisecond, Audit: rec}, nil)
	s := d.create(t, &client.CreateSessionRequest{Policy: shipPolicy})
	r := <-execAsync(d.c, s.ID, "echo", "ship")
	if r.err != nil || r.rep.Reason != "denied" || !strings.Contains(r.rep.Error, "nobody answered") {
		t.Fatalf("timed out: %+v %v", r.rep, r.err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var outcomes []string
	for _, r := range rec.recs {
		switch r := r.(type) {
		case audit.Approval:
			outcomes = append(outcomes, "approval "+r.Outcome)
		case audit.Decision:
			outcomes = append(outcomes, "decision "+r.Outcome)
		}
	}
	if strings.Join(outcomes, ", ") != "approval timeout, decision timeout" {
		t.Errorf("audit: %q", outcomes)
	}
}

// pageClient is a browser's requests to the approvals page: its cookie
// jar, its origin.
type pageClient struct {
	t      *testing.T
	base   string
	origin string
	cookie string
	csrf   string
	hc     *http.Client // nil: http.DefaultClient
}

func (p *pageClient) do(method, path string, body any, hdr map[string]string) (int, map[string]any, http.Header) {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.base+path, rd)
	if p.origin != "" {
		req.Header.Set("Origin", p.origin)
	}
	if p.cookie != "" {
		req.Header.Set("Cookie", p.cookie)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	hc := p.hc
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, resp.Header
}

func TestApprovalsPageAuth(t *testing.T) {
	d := startDaemon(t, daemon.Config{Approvals: true}, &httpapi.Tokens{})
	d.srv.WebAddr = d.tcp
	self := "http://" + d.tcp
	p := &pageClient{t: t, base: self}

	// The page itself is public and locked down.
	st, _, h := p.do("GET", "/approvals", nil, nil)
	if st != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") ||
		!strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") || h.Get("X-Frame-Options") != "DENY" {
		t.Errorf("page: %d %v", st, h)
	}
	if st, _, _ := p.do("GET", "/approvals/state", nil, nil); st != 401 {
		t.Errorf("state without a login: %d", st)
	}

	l, err := d.c.WebLogin(context.Background())
	if err != nil || !strings.HasPrefix(l.URL, self+"/approvals#code=") || l.Code == "" {
		t.Fatalf("web login: %+v %v", l, err)
	}
	// Another origin, or none, cannot log in with it.
	p.origin = "http://evil.example"
	if st, _, _ := p.do("POST", "/approvals/login", map[string]string{"code": l.Code}, nil); st != 403 {
		t.Errorf("login from another origin: %d", st)
	}
	p.origin = ""
	if st, _, _ := p.do("POST", "/approvals/login", map[string]string{"code": l.Code}, nil); st != 403 {
		t.Errorf("login without an origin: %d", st)
	}
	p.origin = self
	if st, _, _ := p.do("POST", "/approvals/login", map[string]string{"code": "00" + l.Code[2:]}, nil); st != 401 {
		t.Errorf("login with a wrong code: %d", st)
	}
	st, body, h := p.do("POST", "/approvals/login", map[string]string{"code": l.Code}, nil)
	if st != 200 {
		t.Fatalf("login: %d %v", st, body)
	}
	ck := h.Get("Set-Cookie")
	if !strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Strict") || !strings.Contains(ck, "Path=/approvals") || strings.Contains(ck, "Secure") {
		t.Errorf("cookie: %s", ck)
	}
	p.cookie, _, _ = strings.Cut(ck, ";")
	p.csrf = body["csrf"].(string)
	if st, _, _ := p.do("POST", "/approvals/login", map[string]string{"code": l.Code}, nil); st != 401 {
		t.Errorf("a login code used twice: %d", st)
	}

	s := d.create(t, &client.CreateSessionRequest{Policy: shipPolicy})
	res := execAsync(d.c, s.ID, "echo", "ship", "<b>x</b>")
	a := waitApproval(t, d.c, "echo", "ship", "<b>x</b>")
	st, body, _ = p.do("GET", "/approvals/state", nil, map[string]string{"X-Moat-Csrf": p.csrf})
	if list, _ := body["approvals"].([]any); st != 200 || len(list) != 1 {
		t.Fatalf("state: %d %v", st, body)
	}
	// The same cookie at another Host name is no session (a name rebound
	// to the daemon's address).
	p.origin = ""
	if st, _, _ := p.do("GET", "/approvals/state", nil, map[string]string{"Host": "rebound.example"}); st != 401 {
		t.Errorf("state at another host: %d", st)
	}
	p.origin = self
	// A POST needs the CSRF token and the page's origin.
	if st, _, _ := p.do("POST", "/approvals/"+a.ID+"/approve", map[string]string{}, nil); st != 403 {
		t.Errorf("approve without the CSRF token: %d", st)
	}
	p.origin = "http://evil.example"
	if st, _, _ := p.do("POST", "/approvals/"+a.ID+"/approve", map[string]string{}, map[string]string{"X-Moat-Csrf": p.csrf}); st != 403 {
		t.Errorf("approve from another origin: %d", st)
	}
	// The page's origin does not open the API's own routes.
	p.origin = self
	if st, _, _ := p.do("GET", "/v1/approvals", nil, nil); st != 403 {
		t.Errorf("the API from the page's origin: %d", st)
	}
	// Positive control: the page's own request goes through.
	if st, body, _ := p.do("POST", "/approvals/"+a.ID+"/approve", map[string]string{"scope": "once"}, map[string]string{"X-Moat-Csrf": p.csrf}); st != 204 {
		t.Fatalf("approve from the page: %d %v", st, body)
	}
	if r := <-res; r.err != nil || r.out != "ship <b>x</b>\n" {
		t.Fatalf("exec approved by the page: %+v %v", r.rep, r.err)
	}
	// Logged out, the cookie is nothing.
	if st, _, _ := p.do("POST", "/approvals/logout", nil, map[string]string{"X-Moat-Csrf": p.csrf}); st != 204 {
		t.Errorf("logout: %d", st)
	}
	if st, _, _ := p.do("GET", "/approvals/state", nil, nil); st != 401 {
		t.Errorf("state after logout: %d", st)
	}
}

// TestTokenRoles: a token limited to sessions (an agent's) cannot see or
// answer the asks of the sessions it drives, by the API or the page, and
// a token limited to approvals (a person's) cannot use the sessions. The
// positive controls: each does what its role allows, and the ask the
// agent's token cannot answer is answered by the person's.
func TestTokenRoles(t *testing.T) {
	tf := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tf, []byte(httpapi.HashToken("ci", "tok-agent")+" sessions\n"+httpapi.HashToken("ci", "tok-person")+" approvals\n"), 0o600)
	tokens, err := httpapi.LoadTokens(tf)
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, daemon.Config{Approvals: true, ApprovalTimeout: 30 * time.Second}, tokens)
	ctx := context.Background()
	agent, person := client.TCP(d.tcp, "tok-agent"), client.TCP(d.tcp, "tok-person")
	defer agent.Close()
	defer person.Close()

	s, err := agent.CreateSession(ctx, &client.CreateSessionRequest{Policy: shipPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if s.Tenant != "token:ci" {
		t.Errorf("tenant %q", s.Tenant)
	}
	res := execAsync(agent, s.ID, "echo", "ship", "it")
	a := waitApproval(t, person, "echo", "ship", "it")

	if _, err := agent.Approvals(ctx); apiCode(err) != client.CodeForbidden {
		t.Errorf("the agent's token lists approvals: %v", err)
	}
	if err := agent.Approve(ctx, a.ID, &client.ApproveRequest{}); apiCode(err) != client.CodeForbidden {
		t.Errorf("the agent's token approves its own ask: %v", err)
	}
	if err := agent.Deny(ctx, a.ID, &client.DenyRequest{}); apiCode(err) != client.CodeForbidden {
		t.Errorf("the agent's token denies: %v", err)
	}
	if _, err := agent.WebLogin(ctx); apiCode(err) != client.CodeForbidden {
		t.Errorf("the agent's token gets a login link for the page: %v", err)
	}
	p := &pageClient{t: t, base: "http://" + d.tcp, origin: "http://" + d.tcp}
	if st, body, _ := p.do("POST", "/approvals/login", map[string]string{"token": "tok-agent"}, nil); st != 403 {
		t.Errorf("the agent's token logs in to the page: %d %v", st, body)
	}
	if _, err := person.Sessions(ctx); apiCode(err) != client.CodeForbidden {
		t.Errorf("the person's token lists sessions: %v", err)
	}
	if _, err := person.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"true"}}, nil, nil); apiCode(err) != client.CodeForbidden {
		t.Errorf("the person's token execs: %v", err)
	}
	if _, err := person.CreateSession(ctx, &client.CreateSessionRequest{}); apiCode(err) != client.CodeForbidden {
		t.Errorf("the person's token creates a session: %v", err)
	}
	// Positive controls: the page takes the person's token, and the
	// person's answer lets the agent's command run.
	if st, body, _ := p.do("POST", "/approvals/login", map[string]string{"token": "tok-person"}, nil); st != 200 {
		t.Errorf("the person's token logs in to the page: %d %v", st, body)
	}
	if err := person.Approve(ctx, a.ID, &client.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.out != "ship it\n" {
		t.Fatalf("approved exec: %+v %v", r.rep, r.err)
	}
	if list, err := agent.Sessions(ctx); err != nil || len(list) != 1 {
		t.Errorf("the agent's token lists its sessions: %+v %v", list, err)
	}

	for line, want := range map[string]string{
		httpapi.HashToken("ci", "x") + " admin":                            "tokens:1: unknown role \"admin\"",
		httpapi.HashToken("ci", "x") + "\n" + httpapi.HashToken("ci", "x"): "tokens:2: this token's hash is listed twice",
	} {
		os.WriteFile(tf, []byte(line+"\n"), 0o600)
		if _, err := httpapi.LoadTokens(tf); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", line, err, want)
		}
	}
}

// TestExecStreamsItsApproval: an exec whose ask waits for a person says
// so in its stream, with the pending approval's id, and the client is
// told before the command goes on; answering that id lets it run. The
// control: an exec without an ask tells the client nothing.
func TestExecStreamsItsApproval(t *testing.T) {
	d := startDaemon(t, daemon.Config{Approvals: true, ApprovalTimeout: 30 * time.Second}, nil)
	s := d.create(t, &client.CreateSessionRequest{Policy: shipPolicy})
	c := client.Unix(d.sock)
	defer c.Close()
	var told []client.Approval
	c.OnApproval = func(a client.Approval) {
		told = append(told, a)
		if err := d.c.Approve(context.Background(), a.ID, &client.ApproveRequest{}); err != nil {
			t.Errorf("approve %s: %v", a.ID, err)
		}
	}
	out, _, rep := run(t, c, s.ID, &client.ExecRequest{Args: []string{"echo", "ship", "it"}})
	if out != "ship it\n" || rep.ExitCode != 0 {
		t.Fatalf("approved exec: %q %+v", out, rep)
	}
	if len(told) != 1 || !slices.Equal(told[0].Command, []string{"echo", "ship", "it"}) || told[0].Rule == "" || told[0].Session != s.ID {
		t.Errorf("told %+v, want the one approval of echo ship it", told)
	}
	told = nil
	if out, _, _ := run(t, c, s.ID, &client.ExecRequest{Args: []string{"echo", "plain"}}); out != "plain\n" || len(told) != 0 {
		t.Errorf("an exec without an ask: %q, told %+v", out, told)
	}
	// An interactive exec (moat exec's over a unix socket) says so too:
	// before, its stream told nothing while the command waited.
	told = nil
	var iout bytes.Buffer
	x, err := c.Interactive(context.Background(), s.ID, &client.ExecRequest{Args: []string{"echo", "ship", "it"}}, &iout, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	x.CloseStdin()
	if rep, err := x.Wait(); err != nil || rep.ExitCode != 0 || iout.String() != "ship it\n" || len(told) != 1 {
		t.Errorf("interactive: %v %+v %q, told %+v", err, rep, iout.String(), told)
	}
}

// TestLateAskAfterExecReturned: a program a command left running asks
// after its exec has been answered; the daemon must not write to that
// answer (before, it wrote to the finished response and the whole daemon
// died of a nil pointer, tried). The ask waits as a pending approval,
// and the daemon serves on.
func TestLateAskAfterExecReturned(t *testing.T) {
	d := startDaemon(t, daemon.Config{Approvals: true, ApprovalTimeout: 30 * time.Second}, nil)
	s := d.create(t, &client.CreateSessionRequest{Policy: shipPolicy})
	ctx := context.Background()
	c := client.Unix(d.sock)
	defer c.Close()
	c.OnApproval = func(a client.Approval) { t.Errorf("told of %+v by an exec that has ended", a) }
	if err := d.c.WriteFile(ctx, s.ID, "bg.sh", []byte("sleep 1; /bin/echo ship it\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, rep := run(t, c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "sh bg.sh >/dev/null 2>&1 &"}}); rep == nil || rep.ExitCode != 0 {
		t.Fatalf("the exec that leaves a program behind: %+v", rep)
	}
	var late client.Approval
	for deadline := time.Now().Add(20 * time.Second); late.ID == ""; time.Sleep(20 * time.Millisecond) {
		list, err := d.c.Approvals(ctx)
		if err != nil {
			t.Fatalf("the daemon after a late ask: %v", err)
		}
		for _, a := range list {
			if a.Session == s.ID {
				late = a
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the late ask never waited as a pending approval")
		}
	}
	if err := d.c.Approve(ctx, late.ID, &client.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if out, _, _ := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"echo", "alive"}}); out != "alive\n" {
		t.Errorf("the daemon after a late ask: %q", out)
	}
}
