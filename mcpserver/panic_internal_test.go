package mcpserver

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestRecoverPanics(t *testing.T) {
	boom := recoverPanics(func(context.Context, string, mcp.Request) (mcp.Result, error) { panic("boom") })
	res, err := boom(context.Background(), "tools/call", nil)
	r, ok := res.(*mcp.CallToolResult)
	if err != nil || !ok || !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "boom") {
		t.Errorf("tool call: %v, %v", res, err)
	}
	if _, err := boom(context.Background(), "resources/list", nil); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("other method: %v", err)
	}
	// Positive control: an answer passes through untouched.
	fine := recoverPanics(func(context.Context, string, mcp.Request) (mcp.Result, error) { return textResult("fine"), nil })
	if res, err := fine(context.Background(), "tools/call", nil); err != nil || res.(*mcp.CallToolResult).IsError {
		t.Errorf("no panic: %v, %v", res, err)
	}
}
