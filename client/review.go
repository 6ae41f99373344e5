package client

import (
	"context"
	"io"
	"net/url"
)

// The review of an overlay or copy session. Each ends the session first
// if it is live; the change set of an ended session stays reviewable
// until applied or discarded.

// Diff returns the diff of a session's change set in format (unified,
// summary, patch or json; "" is unified), leaving out the paths matching
// the exclude globs.
func (c *Client) Diff(ctx context.Context, id, format string, exclude []string) ([]byte, error) {
	q := url.Values{}
	if format != "" {
		q.Set("format", format)
	}
	for _, e := range exclude {
		q.Add("exclude", e)
	}
	resp, err := c.send(ctx, "GET", "/v1/sessions/"+url.PathEscape(id)+"/diff?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// Apply applies a session's change set to its real workspace. A refusal
// (protected paths, host changes) is an *Error (protected_path,
// conflict) whose Details list the paths; nothing was applied then.
func (c *Client) Apply(ctx context.Context, id string, req *ApplyRequest) (*ApplyReport, error) {
	var rep ApplyReport
	if err := c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(id)+"/apply", req, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Discard removes a session's change set.
func (c *Client) Discard(ctx context.Context, id string) error {
	return c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(id)+"/discard", nil, nil)
}
