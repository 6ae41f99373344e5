//go:build linux

package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

type record struct {
	Seq     int64    `json:"seq"`
	Type    string   `json:"type"`
	Reason  string   `json:"reason"`
	Verdict string   `json:"verdict"`
	Command []string `json:"command"`
}

func records(t *testing.T, evs []*client.AuditEvent) []record {
	t.Helper()
	var out []record
	for _, ev := range evs {
		var r record
		if err := json.Unmarshal(ev.Record, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestSessionEvents: a session's event stream holds the rules' decisions
// and each command's run record, in order; a follower sees them live and
// its stream ends with the session, after the sandbox's own record.
func TestSessionEvents(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	pol := "[[rules]]\nmatch = { command = [\"touch\", \"forbidden\"] }\ndecision = \"deny\"\nreason = \"not this file\"\n"
	s := d.create(t, &client.CreateSessionRequest{Policy: pol})

	followed := make(chan []*client.AuditEvent, 1)
	followErr := make(chan error, 1)
	go func() {
		var got []*client.AuditEvent
		followErr <- d.c.Events(ctx, s.ID, 0, true, func(ev *client.AuditEvent) error { got = append(got, ev); return nil })
		followed <- got
	}()
	run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"echo", "hi"}})
	run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"touch", "forbidden"}})

	var now []*client.AuditEvent
	if err := d.c.Events(ctx, s.ID, 0, false, func(ev *client.AuditEvent) error { now = append(now, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	recs := records(t, now)
	var runs []string
	denied := false
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Errorf("record %d has seq %d", i, r.Seq)
		}
		if r.Type == "run" {
			runs = append(runs, strings.Join(r.Command, " ")+":"+r.Reason)
		}
		if r.Type == "decision" && r.Verdict == "deny" && strings.Join(r.Command, " ") == "touch forbidden" {
			denied = true
		}
	}
	if strings.Join(runs, ",") != "echo hi:exit,touch forbidden:denied" || !denied {
		t.Errorf("records so far: runs %q, deny decision %v: %+v", runs, denied, recs)
	}
	var later []*client.AuditEvent
	d.c.Events(ctx, s.ID, int64(len(now)), false, func(ev *client.AuditEvent) error { later = append(later, ev); return nil })
	if len(later) != 0 {
		t.Errorf("records after the last: %d", len(later))
	}

	if err := d.c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-followed:
		if err := <-followErr; err != nil {
			t.Fatalf("follow: %v", err)
		}
		frecs := records(t, got)
		if len(frecs) != len(recs)+1 || frecs[len(frecs)-1].Type != "run" || frecs[len(frecs)-1].Reason != "closed" {
			t.Errorf("the follower saw %+v, want the %d records and the sandbox's closing one", frecs, len(recs))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the followed stream did not end with the session")
	}
	if err := d.c.Events(ctx, s.ID, 0, false, func(*client.AuditEvent) error { return nil }); apiCode(err) != client.CodeEnded {
		t.Errorf("events of an ended session: %v", err)
	}
}

// TestSessionEventsSSE: with Accept: text/event-stream the records are
// server-sent events whose ids are their sequence numbers.
func TestSessionEventsSSE(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"true"}})
	req, _ := http.NewRequest("GET", "http://moat/v1/sessions/"+s.ID+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := rawClient(d.sock).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(string(data), "id: 1\ndata: {\"seq\":1,\"type\":\"run\"") {
		t.Errorf("SSE: %q %q", resp.Header.Get("Content-Type"), data)
	}
	status, e := apiErr(t, rawClient(d.sock), "GET", "http://moat/v1/sessions/"+s.ID+"/events?after=x", "", nil)
	if status != 400 || e.Code != client.CodeBadRequest {
		t.Errorf("bad after: %d %+v", status, e)
	}
	status, e = apiErr(t, rawClient(d.sock), "GET", "http://moat/v1/sessions/"+s.ID+"/events?follow=yes", "", nil)
	if status != 400 || e.Code != client.CodeBadRequest {
		t.Errorf("follow=yes: %d %+v", status, e)
	}
}

// TestSessionEventsNetwork: an allow-mode session's network decisions are
// in its event stream: a refused destination as a deny, beside the
// command's run record. The command's exit report names the refusal,
// and an allowed destination that could not be reached, with why; the
// next command's, which used no network, names nothing (the control).
func TestSessionEventsNetwork(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{Policy: "[network]\nmode = \"allow\"\nallow = [\"allowed.invalid\"]\n"})
	out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "curl -sS -m 10 -o /dev/null -w %{http_code} http://refused.invalid/; curl -s -m 30 https://allowed.invalid/"}})
	if out != "403" {
		t.Fatalf("curl through the proxy: %q", out)
	}
	if !strings.HasPrefix(rep.Network, "network: refused refused.invalid:80 (default deny); could not reach allowed.invalid:443 (resolve allowed.invalid") {
		t.Errorf("the exit report's network line: %q", rep.Network)
	}
	if _, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"true"}}); rep.Network != "" {
		t.Errorf("a command that used no network: %q", rep.Network)
	}
	var net []string
	d.c.Events(context.Background(), s.ID, 0, false, func(ev *client.AuditEvent) error {
		if ev.Type == "network" {
			var r struct{ Host, Decision string }
			json.Unmarshal(ev.Record, &r)
			net = append(net, r.Host+":"+r.Decision)
		}
		return nil
	})
	if len(net) != 2 || net[0] != "refused.invalid:deny" || net[1] != "allowed.invalid:error" {
		t.Errorf("network records %q", net)
	}
}
