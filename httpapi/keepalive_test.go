//go:build linux

package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
)

// A command that prints nothing for a while still gets its answer's
// headers and keepalive lines, which a client with a header or read
// timeout needs; the Go client skips them; nothing follows the exit.
func TestQuietExecKeepsAlive(t *testing.T) {
	d := startDaemonWith(t, daemon.Config{}, nil, func(s *httpapi.Server) { s.KeepAlive = 200 * time.Millisecond })
	s := d.create(t, &client.CreateSessionRequest{})

	// The raw stream: headers long before the command ends, then
	// keepalives, then the exit as the last line.
	hc := rawClient(d.sock)
	hc.Transport.(*http.Transport).ResponseHeaderTimeout = time.Second
	start := time.Now()
	resp, err := hc.Post("http://moat/v1/sessions/"+s.ID+"/exec", "application/json",
		strings.NewReader(`{"args":["sh","-c","sleep 1.5; echo done"]}`))
	if err != nil {
		t.Fatalf("exec: %v (the daemon sent no headers within a second of a quiet command's start)", err)
	}
	defer resp.Body.Close()
	if el := time.Since(start); el > 1200*time.Millisecond || resp.StatusCode != http.StatusOK {
		t.Fatalf("headers after %v, status %d", el, resp.StatusCode)
	}
	var kinds []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev client.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		switch {
		case ev.KeepAlive:
			if sc.Text() != `{"keepalive":true}` {
				t.Errorf("keepalive line %q carries more", sc.Text())
			}
			kinds = append(kinds, "keepalive")
		case ev.Exit != nil:
			kinds = append(kinds, "exit")
		case ev.Data != "":
			kinds = append(kinds, "data")
		default:
			kinds = append(kinds, sc.Text())
		}
	}
	if len(kinds) < 4 || kinds[0] != "keepalive" || kinds[len(kinds)-1] != "exit" || kinds[len(kinds)-2] != "data" {
		t.Fatalf("events %v: want keepalives, the output, then the exit", kinds)
	}

	// Positive control: the Go client returns the same output and report
	// as without keepalives.
	out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "sleep 0.7; echo done"}})
	if out != "done\n" || rep.ExitCode != 0 {
		t.Fatalf("client exec: %q %+v", out, rep)
	}

	// An error before the command starts still has its own status.
	_, e := apiErr(t, hc, "POST", "http://moat/v1/sessions/"+s.ID+"/exec", `{"args":[]}`, nil)
	if e.Code != client.CodeBadRequest {
		t.Fatalf("empty args: %+v", e)
	}
}

// A followed event stream that stays silent gets keepalive lines (SSE
// comments with text/event-stream); the Go client skips them and still
// sees the records that follow.
func TestQuietEventsKeepAlive(t *testing.T) {
	d := startDaemonWith(t, daemon.Config{}, nil, func(s *httpapi.Server) { s.KeepAlive = 150 * time.Millisecond })
	s := d.create(t, &client.CreateSessionRequest{})
	for _, sse := range []bool{false, true} {
		req, _ := http.NewRequest("GET", "http://moat/v1/sessions/"+s.ID+"/events?follow=1", nil)
		if sse {
			req.Header.Set("Accept", "text/event-stream")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		resp, err := rawClient(d.sock).Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		want := `{"type":"keepalive"}` + "\n"
		if sse {
			want = ": keepalive\n\n"
		}
		if n := strings.Count(string(b), want); n < 2 || strings.ReplaceAll(string(b), want, "") != "" {
			t.Errorf("sse %t: %q, want keepalives alone", sse, b)
		}
	}
	// The client: keepalives skipped, the record after them delivered.
	got := make(chan string, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.c.Events(ctx, s.ID, 0, true, func(ev *client.AuditEvent) error { got <- ev.Type; return nil })
	time.Sleep(400 * time.Millisecond)
	run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"true"}})
	select {
	case typ := <-got:
		if typ != "run" {
			t.Errorf("first event %q, want the run record", typ)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no record after the keepalives")
	}
}
