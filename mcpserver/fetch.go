package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/sandbox"
)

type fetchIn struct {
	URL string `json:"url" jsonschema:"an https:// URL on a public host name"`
}

// fetch is the webhook-style request agent platforms offer beside a
// sandbox (moat fetch), made by moat on the host, not by the sandbox:
// daemon.Session.Fetch decides it (the session's [network], then its
// host rules), counts it in the session's budgets, and egress.Fetcher
// holds it to public HTTPS, no redirects, a time and a size bound and the
// proxy's address checks. An ask goes to the approver the client's asks
// fall back to (there is no form for a request), else is refused.
func (s *server) fetch(ctx context.Context, _ *mcp.CallToolRequest, in fetchIn) (*mcp.CallToolResult, any, error) {
	u, err := url.Parse(in.URL)
	if err != nil || u.Hostname() == "" {
		return errorResult(fmt.Sprintf("%q is not a URL: give an https:// URL with a host name", in.URL)), nil, nil
	}
	if ap := s.fallback(); ap != nil {
		ctx = daemon.WithApprover(ctx, ap)
	}
	r, err := s.session().Fetch(ctx, in.URL)
	switch {
	case errors.Is(err, sandbox.ErrDenied):
		return errorResult(fmt.Sprintf("fetch refused: %s. Do not retry this fetch; ask the user if it is needed.", strings.TrimPrefix(err.Error(), sandbox.ErrDenied.Error()+": "))), nil, nil
	case errors.Is(err, daemon.ErrEnded) || errors.Is(err, daemon.ErrDraining):
		return errorResult("the sandbox session has ended: " + err.Error()), nil, nil
	case err != nil:
		return errorResult(err.Error()), nil, nil
	}
	head := fmt.Sprintf("HTTP %d from %s (%s), %d bytes, Content-Type: %s\n\n", r.Status, u.Hostname(), r.Addr, len(r.Body), r.Header.Get("Content-Type"))
	if !utf8.Valid(r.Body) {
		return textResult(head + "(the body is not text; it is not shown)"), nil, nil
	}
	body, _ := truncate(r.Body, s.opts.MaxOutput)
	return textResult(head + body), nil, nil
}
