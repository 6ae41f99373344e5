package mcpserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/mcpserver"
)

// asTenant sends every request with the test's tenant header.
type asTenant struct{ name string }

func (a asTenant) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if a.name != "" {
		r.Header.Set("X-Test-Tenant", a.name)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// httpServer serves /mcp for a daemon of its own (state directory name
// beneath MOAT_STATE_DIR), both ended with the test. Tenants are named by
// a header here (asTenant); moat serve has the daemon's own
// authentication (peer uid, bearer token).
func httpServer(t *testing.T, name string) (*daemon.Manager, *httptest.Server) {
	t.Helper()
	return httpServerWith(t, name, daemon.Config{})
}

// httpServerWith is httpServer with a daemon of cfg (its state directory
// and logger set here).
func httpServerWith(t *testing.T, name string, cfg daemon.Config) (*daemon.Manager, *httptest.Server) {
	t.Helper()
	state := filepath.Join(os.Getenv("MOAT_STATE_DIR"), name)
	cfg.StateDir, cfg.Logger = state, slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Shutdown(context.Background())
		os.RemoveAll(state)
	})
	h := mcpserver.NewHTTPHandler(mcpserver.HTTPConfig{Manager: m, Tenant: func(r *http.Request) (daemon.Tenant, error) {
		name := r.Header.Get("X-Test-Tenant")
		if name == "" {
			return daemon.Tenant{}, errors.New("who are you?")
		}
		// "NAME/ROLE" is a credential of NAME limited to ROLE.
		if name, role, ok := strings.Cut(name, "/"); ok {
			return daemon.TokenTenantRole(name, daemon.Role(role)), nil
		}
		return daemon.TokenTenant(name), nil
	}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return m, srv
}

func TestHTTP(t *testing.T) {
	m, srv := httpServer(t, "daemon-http")
	connect := func(tenant string) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		return c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: asTenant{tenant}}}, nil)
	}

	if _, err := connect(""); err == nil {
		t.Fatal("a request without a tenant was served")
	}
	cs, err := connect("alice")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cs: cs}
	e.ok(t, "write_file", map[string]any{"path": "notes/a.txt", "content": "over http\n"}, "wrote")
	e.ok(t, "run_command", map[string]any{"command": "cat notes/a.txt; pwd"}, "over http")
	e.fails(t, "read_file", map[string]any{"path": "/etc/passwd"}, "path escapes the workspace")
	e.fails(t, "no_such_tool", map[string]any{}, "unknown tool")
	if n := len(m.List(daemon.TokenTenant("alice"))); n != 1 {
		t.Fatalf("alice has %d daemon sessions, want 1", n)
	}

	// Another tenant cannot use alice's MCP session, even knowing its id.
	req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"id"}}}`))
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Transport: asTenant{"mallory"}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's request on alice's session: status %d, want 404", resp.StatusCode)
	}

	// The MCP session's end ends the daemon session.
	cs.Close()
	deadline := time.Now().Add(10 * time.Second)
	for len(m.List(daemon.TokenTenant("alice"))) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("alice's daemon session outlived her MCP session")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// ?session=ID attaches to a session made through the API, with its own
	// policy; it outlives the MCP session. Another tenant's id is unknown.
	own, err := m.Create(context.Background(), daemon.TokenTenant("alice"), &daemon.CreateRequest{Policy: "[env]\nset = { GREETING = \"from-the-api-policy\" }\n"})
	if err != nil {
		t.Fatal(err)
	}
	attach := func(tenant, query string) *env {
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp?" + query, HTTPClient: &http.Client{Transport: asTenant{tenant}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return &env{cs: cs}
	}
	a := attach("alice", "session="+own.ID)
	a.ok(t, "run_command", map[string]any{"command": "echo $GREETING"}, "from-the-api-policy")
	attach("mallory", "session="+own.ID).fails(t, "run_command", map[string]any{"command": "true"}, "no such session")
	attach("alice", "session="+own.ID+"&workspace=/tmp").fails(t, "run_command", map[string]any{"command": "true"}, "not both")
	a.cs.Close()
	time.Sleep(200 * time.Millisecond)
	if _, err := m.Get(daemon.TokenTenant("alice"), own.ID); err != nil {
		t.Errorf("the attached session ended with the MCP session: %v", err)
	}
}

// TestHTTPRoles: a credential limited to sessions (an agent's) has its
// asks kept from its client's elicitation, which whoever drives the
// client answers; one limited to approvals cannot use the MCP server. The
// positive control: the same client with a credential of every role is
// asked.
func TestHTTPRoles(t *testing.T) {
	_, srv := httpServer(t, "daemon-http-roles")
	connect := func(tenant string) (*env, *int, error) {
		asked := new(int)
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				*asked++
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}})
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: asTenant{tenant}}}, nil)
		if err != nil {
			return nil, nil, err
		}
		t.Cleanup(func() { cs.Close() })
		return &env{cs: cs}, asked, nil
	}
	push := map[string]any{"command": "git push --dry-run /nowhere"}
	all, asked, err := connect("alice")
	if err != nil {
		t.Fatal(err)
	}
	all.call(t, "run_command", push)
	if *asked != 1 {
		t.Fatalf("a credential of every role: its client was asked %d times, want 1", *asked)
	}
	agent, asked, err := connect("alice/sessions")
	if err != nil {
		t.Fatal(err)
	}
	agent.fails(t, "run_command", push, "needs a person's approval")
	if *asked != 0 {
		t.Errorf("a sessions-only credential's client was asked %d times", *asked)
	}
	agent.ok(t, "run_command", map[string]any{"command": "echo runs"}, "runs")
	if _, _, err := connect("alice/approvals"); err == nil {
		t.Error("an approvals-only credential connected to the MCP server")
	}
}
