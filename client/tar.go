package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
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
// ends in an error, never as a whole one. One whole but for entries the
// daemon could not read (a command made them mode 000) is written, and
// then DownloadTar returns a *LeftOutError naming them.
func (c *Client) DownloadTar(ctx context.Context, id, dir string, w io.Writer) error {
	resp, err := c.send(ctx, "GET", filesPath(id, "/tar", dir, nil), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return err
	}
	if v := resp.Trailer.Get(LeftOutTrailer); v != "" {
		return parseLeftOut(v)
	}
	return nil
}

// LeftOutTrailer is the HTTP trailer of a tar download that names the
// entries it left out (FormatLeftOut).
const LeftOutTrailer = "Moat-Left-Out"

// LeftOutError: a download's archive is whole but for Count entries the
// daemon could not read, the first of them named in Paths (relative to
// the directory asked for), each with the kernel's reason in Why.
type LeftOutError struct {
	Count int
	Paths []string
	Why   []string
}

func (e *LeftOutError) Error() string {
	return fmt.Sprintf("the archive lacks %d entries the daemon could not read", e.Count)
}

// FormatLeftOut is the value of LeftOutTrailer: the count, then each path
// and its reason as Go-quoted ASCII strings (a path a command named may
// hold any byte), separated by spaces.
func FormatLeftOut(count int, paths, why []string) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(count))
	for i, p := range paths {
		b.WriteByte(' ')
		b.WriteString(strconv.QuoteToASCII(p))
		b.WriteByte(' ')
		b.WriteString(strconv.QuoteToASCII(why[i]))
	}
	return b.String()
}

func parseLeftOut(v string) *LeftOutError {
	n, rest, _ := strings.Cut(v, " ")
	e := &LeftOutError{}
	e.Count, _ = strconv.Atoi(n)
	for rest != "" {
		p, err := strconv.QuotedPrefix(rest)
		if err != nil {
			break
		}
		rest = strings.TrimPrefix(rest[len(p):], " ")
		w, err := strconv.QuotedPrefix(rest)
		if err != nil {
			break
		}
		rest = strings.TrimPrefix(rest[len(w):], " ")
		p, _ = strconv.Unquote(p)
		w, _ = strconv.Unquote(w)
		e.Paths, e.Why = append(e.Paths, p), append(e.Why, w)
	}
	e.Count = max(e.Count, len(e.Paths), 1)
	return e
}
