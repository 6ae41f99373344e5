package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/sandbox"
)

// The policy's write rules decide write_file and edit_file in package
// daemon, which every files API caller goes through; here only who
// answers their asks is chosen, as for a command: the client's user
// (elicitation) or the server's approver.

// gateWrite returns ctx carrying the approver of a write of rel, or the
// input-required result that asks the client's user first.
func (s *server) gateWrite(ctx context.Context, req *mcp.CallToolRequest, rel string) (context.Context, *mcp.CallToolResult) {
	a := writeAction(rel)
	d := s.rules.DecideWrite(rel)
	ap, res := s.gate(req, a, d)
	if res != nil {
		return ctx, res
	}
	if ap == nil && d.Verdict == harness.Ask {
		// Nobody to ask: said as a refused command is (refusal), not as
		// the files API says it to its own callers.
		rule := "the write rules"
		if d.Rule != nil {
			rule = "rule `" + d.Rule.String() + "`"
		}
		return ctx, errorResult(fmt.Sprintf("refused by %s: %s. Writing %s needs a person's approval and this client offers no way to ask one (elicitation): ask the user to approve it or to write it themselves.", rule, d.Reason, rel))
	}
	if ap != nil && d.Verdict == harness.Ask {
		ap = &writeApproval{inner: ap, rel: rel, d: d}
	}
	return daemon.WithApprover(ctx, ap), nil
}

func writeAction(rel string) harness.Action {
	return harness.Action{Argv: []string{sandbox.WriteFile, rel}, Write: rel}
}

// writeApproval is a person's answer about writing one file: asked once,
// about the file, it also answers for the directories made on the way.
type writeApproval struct {
	inner sandbox.Approver
	rel   string
	d     harness.Decision

	once sync.Once
	yes  bool
	err  error
}

func (w *writeApproval) Name() string { return w.inner.Name() }

func (w *writeApproval) Approve(ctx context.Context, a harness.Action, _ harness.Decision) (bool, error) {
	if a.Write != w.rel && !strings.HasPrefix(w.rel, a.Write+"/") {
		return false, fmt.Errorf("the user was asked about a write of %s, not %s", w.rel, a.Write)
	}
	w.once.Do(func() { w.yes, w.err = w.inner.Approve(ctx, writeAction(w.rel), w.d) })
	return w.yes, w.err
}
