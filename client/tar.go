package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
)

// UploadTar writes the tar archive r into the directory dir of a
// session's workspace (made when missing). The daemon checks every entry
// before writing any: a bad one refuses the whole archive.
func (c *Client) UploadTar(ctx context.Context, id, dir string, r io.Reader) (*TarReport, error) {
	req, err := http.NewRequestWithContext(ctx, "PUT", c.base+filesPath(id, "/tar", dir, nil), r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := c.roundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var rep TarReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// DownloadTar writes the directory dir of a session's workspace to w as a
// tar archive, links as links. An archive the daemon had to cut short
// ends in an error, never as a whole one.
func (c *Client) DownloadTar(ctx context.Context, id, dir string, w io.Writer) error {
	resp, err := c.send(ctx, "GET", filesPath(id, "/tar", dir, nil), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}
