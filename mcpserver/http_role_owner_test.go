package mcpserver_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// intoSession sends every request with the test's tenant header and,
// once set, another MCP session's id in place of the client's own.
type intoSession struct {
	tenant string
	mu     sync.Mutex
	id     string
}

func (a *intoSession) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Test-Tenant", a.tenant)
	a.mu.Lock()
	if a.id != "" && r.Header.Get("Mcp-Session-Id") != "" {
		r.Header.Set("Mcp-Session-Id", a.id)
	}
	a.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// TestHTTPSessionOwnedByCredential: an MCP session belongs to the
// credential that began it, role included. One begun by a credential of
// every role may ask its client to approve an ask; a sessions-only
// credential of the same tenant (an agent's) that knows its id must not
// use it, or the agent would answer its own ask. Controls: the owner's
// client is asked and its command runs, and the agent's own MCP session
// works, asking nobody.
func TestHTTPSessionOwnedByCredential(t *testing.T) {
	_, srv := httpServer(t, "daemon-http-role-owner")
	connect := func(tr http.RoundTripper) (*env, *int) {
		asked := new(int)
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				*asked++
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}})
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: tr}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return &env{cs: cs}, asked
	}
	push := map[string]any{"command": "git push --dry-run /nowhere"}
	owner, ownerAsked := connect(asTenant{"alice"})
	owner.call(t, "run_command", push)
	if *ownerAsked != 1 {
		t.Fatalf("positive control: the owner's client was asked %d times, want 1", *ownerAsked)
	}

	tr := &intoSession{tenant: "alice/sessions"}
	agent, agentAsked := connect(tr)
	agent.ok(t, "run_command", map[string]any{"command": "echo runs"}, "runs")
	ownerID := owner.cs.ID()
	tr.mu.Lock()
	tr.id = ownerID
	tr.mu.Unlock()
	res, err := agent.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_command", Arguments: push})
	if *agentAsked != 0 || err == nil {
		t.Errorf("a sessions-only credential used the MCP session of a credential of every role: asked %d times; %+v, %v", *agentAsked, res, err)
	} else if !strings.Contains(err.Error(), "session not found") {
		t.Errorf("refused, but not as a session that does not exist: %v", err)
	}
}
