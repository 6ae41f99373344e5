package client

import (
	"context"
	"net/url"
	"time"
)

// Approval is an action of a session that waits for a person: a command
// (Command, Dir) or a network request (Network set; Command is the method
// and host:port/path), the rule that asks and why.
type Approval struct {
	ID      string   `json:"id"`
	Session string   `json:"session"`
	Tenant  string   `json:"tenant"`
	Command []string `json:"command"`
	Dir     string   `json:"dir,omitempty"`
	Network bool     `json:"network,omitempty"`
	// Rule names the rule that asks; "" when the command line itself
	// hides what it runs. Decided is the simple command of a shell line
	// that asked.
	Rule    string   `json:"rule,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	Decided []string `json:"decided,omitempty"`
	// Diff is an overlay or copy session's changes so far, a unified diff
	// (cut when long).
	Diff    string    `json:"diff,omitempty"`
	Created time.Time `json:"created"`
	// Expires is when the action is refused if nobody answers.
	Expires time.Time `json:"expires"`
}

// ApproveRequest answers a pending approval with a yes.
type ApproveRequest struct {
	// Scope is "once" (the default: this exact action), "prefix" (commands
	// beginning with Prefix, or with the command asked about) or "session"
	// (everything the same rule asks about in the session).
	Scope  string   `json:"scope,omitempty"`
	Prefix []string `json:"prefix,omitempty"`
	// For is how long a prefix or session approval lasts ("15m"; required
	// for them, at most 24h).
	For string `json:"for,omitempty"`
	// Name and Why are recorded with the answer in the audit stream.
	Name string `json:"name,omitempty"`
	Why  string `json:"why,omitempty"`
}

// DenyRequest answers a pending approval with a no.
type DenyRequest struct {
	Name string `json:"name,omitempty"`
	Why  string `json:"why,omitempty"`
}

// WebLogin is a one-time link that logs a browser in to the approvals
// page (GET /approvals) as the tenant that asked for it.
type WebLogin struct {
	// URL is the page with the code in its fragment; "" when the daemon
	// has no TCP listener a browser could reach (Code is then for a
	// page served some other way).
	URL     string    `json:"url,omitempty"`
	Code    string    `json:"code"`
	Expires time.Time `json:"expires"`
}

// Approvals lists the pending approvals the caller may answer: those of
// its own sessions (all, for the daemon's own user).
func (c *Client) Approvals(ctx context.Context) ([]Approval, error) {
	var out struct {
		Approvals []Approval `json:"approvals"`
	}
	err := c.do(ctx, "GET", "/v1/approvals", nil, &out)
	return out.Approvals, err
}

// Approval returns one pending approval.
func (c *Client) Approval(ctx context.Context, id string) (*Approval, error) {
	var a Approval
	if err := c.do(ctx, "GET", "/v1/approvals/"+url.PathEscape(id), nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Approve lets the pending action id run (and, by req's scope, the later
// ones it covers until it expires), under the session's policy.
func (c *Client) Approve(ctx context.Context, id string, req *ApproveRequest) error {
	return c.do(ctx, "POST", "/v1/approvals/"+url.PathEscape(id)+"/approve", req, nil)
}

// Deny refuses the pending action id.
func (c *Client) Deny(ctx context.Context, id string, req *DenyRequest) error {
	return c.do(ctx, "POST", "/v1/approvals/"+url.PathEscape(id)+"/deny", req, nil)
}

// WebLogin returns a one-time login link to the approvals page.
func (c *Client) WebLogin(ctx context.Context) (*WebLogin, error) {
	var l WebLogin
	if err := c.do(ctx, "POST", "/v1/approvals/web-login", struct{}{}, &l); err != nil {
		return nil, err
	}
	return &l, nil
}
