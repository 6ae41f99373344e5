package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/moatbox/moat/daemon"
)

// The event stream of a session: its audit records, one JSON object per
// line (NDJSON), or as server-sent events when the client accepts
// text/event-stream (each record's seq its event id, so Last-Event-ID
// resumes). Each record is package audit's, with "seq" added first.

func (s *Server) sessionEvents(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, err := s.Manager.Get(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var follow bool
	switch f := q.Get("follow"); f {
	case "1", "true":
		follow = true
	case "", "0", "false":
	default:
		return badRequest("follow: %q: want 1 or true (or 0, false)", f)
	}
	after, from := r.Header.Get("Last-Event-ID"), "the Last-Event-ID header"
	if a := q.Get("after"); a != "" {
		after, from = a, "after"
	}
	var seq int64
	if after != "" {
		if seq, err = strconv.ParseInt(after, 10, 64); err != nil || seq < 0 {
			return badRequest("%s: %q is not a sequence number", from, after)
		}
	}
	sse := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	flush()
	for {
		// A followed stream that stays silent gets a keepalive line (an
		// SSE comment), for clients and proxies that drop a connection
		// with no bytes for a while.
		wctx, cancel := context.WithTimeout(r.Context(), s.keepAliveEvery())
		events, dropped, ended := sess.Events(wctx, seq, follow)
		cancel()
		if follow && len(events) == 0 && dropped == 0 && !ended && r.Context().Err() == nil {
			var err error
			if sse {
				_, err = fmt.Fprint(w, ": keepalive\n\n")
			} else {
				_, err = fmt.Fprintln(w, `{"type":"keepalive"}`)
			}
			if err != nil {
				return nil // the client went away
			}
			flush()
			continue
		}
		if dropped > 0 {
			// The session kept no more of them: the reader hears how many
			// it missed rather than nothing.
			line := fmt.Sprintf("{\"type\":\"dropped\",\"count\":%d}", dropped)
			if sse {
				fmt.Fprintf(w, "data: %s\n\n", line)
			} else {
				fmt.Fprintln(w, line)
			}
		}
		for _, e := range events {
			// The record's own object, "seq" first; texts scrubbed of the
			// daemon's state directory like every other answer.
			line := fmt.Sprintf("{\"seq\":%d,%s", e.Seq, s.scrub(string(e.Record[1:])))
			var err error
			if sse {
				_, err = fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.Seq, line)
			} else {
				_, err = fmt.Fprintln(w, line)
			}
			if err != nil {
				return nil // the client went away
			}
			seq = e.Seq
		}
		flush()
		if ended || !follow || r.Context().Err() != nil {
			return nil
		}
	}
}
