package mcpserver_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/daemon"
)

// TestHTTPOwnerAfterFailedDelete: a DELETE of its MCP session that the
// transport refuses (here an unknown protocol version) leaves the session
// alive, and its owner with it: another tenant that knows the session's
// id still gets 404, and the owner goes on using it (the positive
// control).
func TestHTTPOwnerAfterFailedDelete(t *testing.T) {
	_, srv := httpServer(t, "daemon-http-owner")
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: asTenant{"alice"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	e := &env{cs: cs}
	e.ok(t, "run_command", map[string]any{"command": "echo mine"}, "mine")

	send := func(tenant, method, body string, hdr map[string]string) int {
		req, _ := http.NewRequest(method, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{Transport: asTenant{tenant}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := send("alice", "DELETE", "", map[string]string{"Mcp-Protocol-Version": "1999-01-01"}); st/100 == 2 {
		t.Fatalf("the DELETE with an unknown protocol version succeeded (%d): the test proves nothing", st)
	}
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo theirs > stolen"}}}`
	if st := send("mallory", "POST", call, nil); st != http.StatusNotFound {
		t.Errorf("another tenant's request on alice's session after a refused DELETE: status %d, want 404", st)
	}
	if out := e.ok(t, "run_command", map[string]any{"command": "echo still mine; ls"}, "still mine"); strings.Contains(out, "stolen") {
		t.Errorf("another tenant's command ran in alice's session: %s", out)
	}
}

// TestHTTPEndWithoutInitialized: an MCP session whose client never sent
// the initialized notification (the SDK serves its calls all the same)
// still ends its daemon session when it ends; a client that sent it is
// the positive control.
func TestHTTPEndWithoutInitialized(t *testing.T) {
	m, srv := httpServer(t, "daemon-http-noinit")
	for _, notify := range []bool{true, false} {
		tenant := "quiet"
		if notify {
			tenant = "polite"
		}
		send := func(method, id, body string) *http.Response {
			req, _ := http.NewRequest(method, srv.URL+"/mcp", strings.NewReader(body))
			if id != "" {
				req.Header.Set("Mcp-Session-Id", id)
			}
			req.Header.Set("X-Test-Tenant", tenant)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp
		}
		resp := send("POST", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		id := resp.Header.Get("Mcp-Session-Id")
		if id == "" {
			t.Fatalf("%s: initialize: %s, no session id", tenant, resp.Status)
		}
		if notify {
			send("POST", id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		}
		send("POST", id, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true"}}}`)
		if n := len(m.List(daemon.TokenTenant(tenant))); n != 1 {
			t.Fatalf("%s: %d daemon sessions after a tool call, want 1", tenant, n)
		}
		if resp := send("DELETE", id, ""); resp.StatusCode/100 != 2 {
			t.Fatalf("%s: DELETE: %s", tenant, resp.Status)
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(m.List(daemon.TokenTenant(tenant))) > 0 {
			if time.Now().After(deadline) {
				t.Errorf("%s: the daemon session outlived its MCP session", tenant)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestHTTPSessionsBounded: a credential keeps at most 64 MCP sessions at
// once: the next initialize is refused (429) rather than held, and one
// ended makes room; another tenant is not held to the first's count.
// Before, a tenant that only ever initialised grew the daemon's memory
// without bound until the idle timeout (tried: 6,000 sessions, 280 MB).
func TestHTTPSessionsBounded(t *testing.T) {
	_, srv := httpServer(t, "daemon-http-bounded")
	const init = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	send := func(tenant, method, id string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+"/mcp", strings.NewReader(init))
		if id != "" {
			req.Header.Set("Mcp-Session-Id", id)
		}
		req.Header.Set("X-Test-Tenant", tenant)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
	}
	var first string
	for i := range 64 {
		st, id := send("many", "POST", "")
		if st != http.StatusOK || id == "" {
			t.Fatalf("initialize %d: status %d, session %q", i, st, id)
		}
		if i == 0 {
			first = id
		}
	}
	if st, _ := send("many", "POST", ""); st != http.StatusTooManyRequests {
		t.Errorf("the 65th initialize: status %d, want 429", st)
	}
	if st, _ := send("other", "POST", ""); st != http.StatusOK {
		t.Errorf("another tenant's initialize: status %d", st)
	}
	if st, _ := send("many", "DELETE", first); st/100 != 2 {
		t.Fatalf("DELETE: %d", st)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, _ := send("many", "POST", "")
		if st == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a DELETE the next initialize still gets %d", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHTTPDeleteEndsRunningCalls: a DELETE ends the MCP session's daemon
// session at once, a tool call's command still running in it included:
// it waited for the command to end by itself (or at the wall limit),
// with the command and the sandbox alive meanwhile (found by a tester).
// The control: the call is running, and the session alive, before it.
func TestHTTPDeleteEndsRunningCalls(t *testing.T) {
	m, srv := httpServer(t, "daemon-http-delete")
	send := func(method, id, body string, timeout time.Duration) (*http.Response, error) {
		req, _ := http.NewRequest(method, srv.URL+"/mcp", strings.NewReader(body))
		if id != "" {
			req.Header.Set("Mcp-Session-Id", id)
		}
		req.Header.Set("X-Test-Tenant", "busy")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	resp, err := send("POST", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	send("POST", id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, time.Minute)
	go send("POST", id, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 300","timeout_seconds":600}}}`, 10*time.Minute)
	tenant := daemon.TokenTenant("busy")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if l := m.List(tenant); len(l) == 1 && l[0].Status().Running > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("control: no command running in the session: %+v", m.List(tenant))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp, err := send("DELETE", id, "", time.Minute); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %v %v, want it answered while the command ran", resp, err)
	}
	if l := m.List(tenant); len(l) != 0 {
		t.Errorf("the daemon session outlived the DELETE: %+v", l)
	}
}

// TestHTTPCallEndsWithItsPost: a tool call whose POST ends (its client
// went) ends too: the ask it raised is refused, not left pending for a
// person to approve a write nobody waits for (found by a tester: it was
// approved, and the file written). The transport keeps no events for a
// stream to be resumed, so nobody could have its answer. The control:
// while its POST stays open, the same call's ask stays pending.
func TestHTTPCallEndsWithItsPost(t *testing.T) {
	m, srv := httpServerWith(t, "daemon-http-post-gone", daemon.Config{Approvals: true, ApprovalTimeout: time.Minute})
	agent := daemon.TokenTenantRole("carol", daemon.RoleSessions)
	person := daemon.TokenTenant("carol")
	ws, err := m.Create(context.Background(), agent, &daemon.CreateRequest{
		Policy: "[[rules]]\nname = \"env-asks\"\nmatch = { write = \"**/*.env\" }\ndecision = \"ask\"\n"})
	if err != nil {
		t.Fatal(err)
	}
	send := func(ctx context.Context, id, body string) (*http.Response, string, error) {
		u := srv.URL + "/mcp?session=" + ws.ID
		req, _ := http.NewRequestWithContext(ctx, "POST", u, strings.NewReader(body))
		if id != "" {
			req.Header.Set("Mcp-Session-Id", id)
		}
		req.Header.Set("X-Test-Tenant", "carol/sessions")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, string(b), err
	}
	resp, _, err := send(context.Background(), "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	send(context.Background(), id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	write := func(ctx context.Context, name string) chan string {
		out := make(chan string, 1)
		go func() {
			_, body, err := send(ctx, id, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"`+name+`","content":"late"}}}`)
			if err != nil {
				body = err.Error()
			}
			out <- body
		}()
		return out
	}
	pending := func(name string) *daemon.Approval {
		for _, a := range m.Approvals(person) {
			if strings.Contains(strings.Join(a.What(), " "), name) {
				return a
			}
		}
		return nil
	}
	waitPending := func(name string) *daemon.Approval {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if a := pending(name); a != nil {
				return a
			}
		}
		t.Fatalf("no pending approval of a write to %s: %+v", name, m.Approvals(person))
		return nil
	}

	// The control: the POST stays open, the ask stays.
	kept := write(context.Background(), "kept.env")
	a := waitPending("kept.env")
	// Named with its place in the policy, as the files API's asks are.
	if !strings.HasPrefix(a.Rule, "env-asks (") {
		t.Errorf("the ask names its rule %q, want it with its line", a.Rule)
	}
	time.Sleep(time.Second)
	if pending("kept.env") == nil {
		t.Fatal("control: the ask of a call whose POST is open went")
	}
	if _, err := m.Deny(person, a.ID, "", "not now"); err != nil {
		t.Fatal(err)
	}
	if out := <-kept; !strings.Contains(out, "not now") {
		t.Errorf("control: the denied call answered %q", out)
	}

	ctx, cancel := context.WithCancel(context.Background())
	gone := write(ctx, "gone.env")
	waitPending("gone.env")
	cancel()
	<-gone
	for deadline := time.Now().Add(20 * time.Second); pending("gone.env") != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the ask of a call whose client went stays pending")
		}
	}
	if _, err := ws.ReadFile("gone.env"); err == nil {
		t.Error("the write of a call whose client went was made")
	}
}
