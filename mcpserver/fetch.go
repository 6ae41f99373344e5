package mcpserver

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/harness"
)

type fetchIn struct {
	URL string `json:"url" jsonschema:"an https:// URL on a public host name"`
}

// fetch is the webhook-style request agent platforms allow beside a
// sandbox (moat fetch): made by moat on the host, not by the sandbox, so
// it needs no network in the session; egress.Fetcher holds it to public
// HTTPS, no redirects, a time and a size bound and the proxy's address
// checks, and the policy's host rules decide it as they decide the
// proxy's destinations.
func (s *server) fetch(ctx context.Context, _ *mcp.CallToolRequest, in fetchIn) (*mcp.CallToolResult, any, error) {
	u, err := url.Parse(in.URL)
	if err != nil || u.Hostname() == "" {
		return errorResult(fmt.Sprintf("%q is not a URL: give an https:// URL with a host name", in.URL)), nil, nil
	}
	port := 443
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return errorResult(fmt.Sprintf("%q: bad port", in.URL)), nil, nil
		}
	}
	if s.rules != nil {
		d := s.rules.DecideHost(harness.Request{Host: strings.ToLower(u.Hostname()), Port: port, Method: "GET", Path: u.Path})
		rule := "the rules"
		if d.Rule != nil {
			rule = "rule `" + d.Rule.String() + "`"
		}
		switch d.Verdict {
		case harness.Deny:
			return errorResult(fmt.Sprintf("refused by %s: %s. Do not retry this fetch; ask the user if it is needed.", rule, d.Reason)), nil, nil
		case harness.Ask:
			return errorResult(fmt.Sprintf("refused by %s: %s. Requests to %s need a person's approval: ask the user to fetch it or to allow it.", rule, d.Reason, u.Hostname())), nil, nil
		}
	}
	// The session's request and network budgets count it, as they count
	// its commands' requests.
	sess := s.session()
	if err := sess.SpendRequest(u.Hostname()); err != nil {
		return errorResult(fmt.Sprintf("refused: %v. Do not retry this fetch.", err)), nil, nil
	}
	f := s.opts.Fetcher
	if f == nil {
		f = &egress.Fetcher{}
	}
	r, err := f.Fetch(ctx, in.URL)
	sess.SpendFetched(in.URL, r)
	if err != nil {
		return errorResult(err.Error()), nil, nil
	}
	head := fmt.Sprintf("HTTP %d from %s (%s), %d bytes, Content-Type: %s\n\n", r.Status, u.Hostname(), r.Addr, len(r.Body), r.Header.Get("Content-Type"))
	if !utf8.Valid(r.Body) {
		return textResult(head + "(the body is not text; it is not shown)"), nil, nil
	}
	body, _ := truncate(r.Body, s.opts.MaxOutput)
	return textResult(head + body), nil, nil
}
