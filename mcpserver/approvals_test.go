package mcpserver_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/daemon"
)

// TestPendingApprovalFallback: a client that cannot ask its user gets
// the daemon's pending approvals, answered by a person through the daemon
// (moat approve, the approvals page), as /mcp on moat serve does.
func TestPendingApprovalFallback(t *testing.T) {
	e := start(t, setup{policy: askPolicy, approvals: time.Minute})
	self := daemon.UIDTenant(os.Geteuid())
	call := func(command string) chan string {
		ch := make(chan string, 1)
		go func() {
			res, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": command}})
			if err != nil {
				ch <- "protocol error: " + err.Error()
				return
			}
			var b strings.Builder
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					b.WriteString(tc.Text)
				}
			}
			ch <- b.String()
		}()
		return ch
	}
	pending := func(argv ...string) *daemon.Approval {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			for _, a := range e.m.Approvals(self) {
				if slices.Equal(a.Argv, argv) {
					return a
				}
			}
		}
		t.Fatalf("no pending approval of %q", argv)
		return nil
	}

	res := call("echo deployed; deploy now")
	a := pending("/bin/sh", "-c", "echo deployed; deploy now")
	if !strings.Contains(a.Rule, "deploy") || a.Reason != "deploying changes production" {
		t.Errorf("approval: %+v", a)
	}
	if _, err := e.m.Approve(self, a.ID, daemon.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	// The shell runs; `deploy` itself is no program here.
	if out := <-res; !strings.Contains(out, "deployed") {
		t.Errorf("approved: %s", out)
	}

	res = call("deploy again")
	a = pending("/bin/sh", "-c", "deploy again")
	if _, err := e.m.Deny(self, a.ID, "", "not now"); err != nil {
		t.Fatal(err)
	}
	if out := <-res; !strings.Contains(out, "not approved") || !strings.Contains(out, "deploy") || !strings.Contains(out, "not now") {
		t.Errorf("denied: %s", out)
	}
}
