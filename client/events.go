package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
)

// AuditEvent is one line of a session's event stream: one of package
// audit's records (Type: decision, network, denial, run) with its place
// in the stream, or Type "dropped" with Count records the daemon no longer
// kept. Record is the whole line. (A followed stream that stays silent also
// carries Type "keepalive" lines, which Events skips.)
type AuditEvent struct {
	Seq    int64           `json:"seq"`
	Type   string          `json:"type"`
	Count  int64           `json:"count,omitempty"`
	Record json.RawMessage `json:"-"`
}

// Events reads a session's audit records after sequence number after (0:
// from the start) and calls fn with each; with follow, it goes on with
// new ones until the session ends, fn returns an error, or ctx is done.
func (c *Client) Events(ctx context.Context, id string, after int64, follow bool, fn func(*AuditEvent) error) error {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if follow {
		q.Set("follow", "1")
	}
	resp, err := c.send(ctx, "GET", "/v1/sessions/"+url.PathEscape(id)+"/events?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		ev := &AuditEvent{Record: append(json.RawMessage(nil), sc.Bytes()...)}
		if err := json.Unmarshal(ev.Record, ev); err != nil {
			return fmt.Errorf("events: bad stream line: %w", err)
		}
		if ev.Type == "keepalive" {
			continue // the daemon's sign of life in a silent followed stream
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("events: stream: %w", err)
	}
	return nil
}
