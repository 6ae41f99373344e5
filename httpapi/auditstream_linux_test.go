package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// streamRecord is what the tests read of a record of the daemon's audit
// stream.
type streamRecord struct {
	Type     string         `json:"type"`
	Session  string         `json:"session"`
	Tenant   string         `json:"tenant"`
	Host     string         `json:"host"`
	Decision string         `json:"decision"`
	Layer    string         `json:"layer"`
	What     string         `json:"what"`
	Command  []string       `json:"command"`
	Event    string         `json:"event"`
	Reason   string         `json:"reason"`
	Unclean  bool           `json:"unclean"`
	Reaped   []string       `json:"reaped"`
	PrevPID  int            `json:"previous_pid"`
	Count    int            `json:"count"`
	Daemon   int            `json:"daemon"`
	Types    map[string]int `json:"types"`
}

// readStream reads the daemon's audit stream at path, after checking its
// chain as moat audit verify does.
func readStream(t *testing.T, path string) []streamRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := audit.Verify(bytes.NewReader(data)); err != nil {
		t.Fatalf("the audit stream does not verify: %v", err)
	}
	var out []streamRecord
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r streamRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a record: %q", line)
		}
		out = append(out, r)
	}
	return out
}

// auditDaemon is startDaemon with its audit stream in a file, closed after
// the daemon's shutdown.
func auditDaemon(t *testing.T, cfg daemon.Config) (*testDaemon, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	aw, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aw.Close() }) // after the daemon's shutdown, registered later
	cfg.Audit = aw
	return startDaemon(t, cfg, nil), path
}

// loopbackServer serves HTTP on 127.0.0.1 and returns its port.
func loopbackServer(t *testing.T) int {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "served") }))
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return l.Addr().(*net.TCPAddr).Port
}

const loopbackPolicy = `[network]
mode = "allow"
allow = ["localhost"]
allow_cidrs = ["127.0.0.1/32"]
`

// TestDaemonAuditHoldsSessionRecords: what a session's event stream gets
// (network decisions, a refused system call, each command's run record)
// is in the daemon's audit stream too, tagged with the session and its
// tenant, between the session's start and its end: a refused host and a
// refused system call are there after the session is gone. The positive
// control: the allowed host's request, which passed, is there as an
// allow.
func TestDaemonAuditHoldsSessionRecords(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	port := loopbackServer(t)
	d, path := auditDaemon(t, daemon.Config{})
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{Policy: loopbackPolicy})
	curl := func(url string) string {
		out, _, _ := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"curl", "-sS", "--noproxy", "", "-m", "20", "-o", "/dev/null", "-w", "%{http_code}", url}})
		return out
	}
	if out := curl(fmt.Sprintf("http://localhost:%d/", port)); out != "200" {
		t.Fatalf("positive control: the allowed host answers through the proxy: %q", out)
	}
	if out := curl("http://refused.invalid/"); out != "403" {
		t.Fatalf("the refused host: %q", out)
	}
	run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "unshare -r true 2>/dev/null; true"}})
	if err := d.c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}

	var allowed, refused, denial, runs, started, ended bool
	for _, r := range readStream(t, path) {
		if r.Session != s.ID {
			continue
		}
		if r.Tenant != s.Tenant {
			t.Errorf("a %s record of session %s has tenant %q, want %q", r.Type, s.ID, r.Tenant, s.Tenant)
		}
		switch {
		case r.Type == audit.TypeSession && r.Event == "start":
			started = true
		case r.Type == audit.TypeSession && r.Event == "end":
			ended = r.Reason == "deleted"
		case ended:
			t.Errorf("a %s record after the session's end", r.Type)
		case !started:
			t.Errorf("a %s record before the session's start", r.Type)
		case r.Type == audit.TypeNetwork && r.Host == "localhost":
			allowed = r.Decision == "allow"
		case r.Type == audit.TypeNetwork && r.Host == "refused.invalid":
			refused = r.Decision == "deny"
		case r.Type == audit.TypeDenial && r.What == "unshare":
			denial = r.Layer == "seccomp"
		case r.Type == audit.TypeRun && strings.Join(r.Command, " ") == "sh -c unshare -r true 2>/dev/null; true":
			runs = true
		}
	}
	if !allowed {
		t.Error("positive control: the allowed host's request is not in the audit stream as an allow")
	}
	if !refused || !denial {
		t.Errorf("in the audit stream: the refused host %v, the refused system call %v", refused, denial)
	}
	if !runs || !started || !ended {
		t.Errorf("in the audit stream: the command's run record %v, the session's start %v, its end (deleted) %v", runs, started, ended)
	}
}

// TestDaemonAuditAcrossKill: a daemon killed with SIGKILL while a session
// lives, then started again on the same state directory and audit stream,
// writes its start saying the previous daemon did not stop cleanly and
// which session it reaped, and that session's end (reaped), tagged with
// its tenant; the chain verifies across every daemon. So does a daemon
// killed without sessions. The controls: the first daemon's start, and
// one after a clean stop (recorded), say nothing unclean, and the stream
// with one record edited no longer verifies.
func TestDaemonAuditAcrossKill(t *testing.T) {
	dir, err := os.MkdirTemp("", "moat-audit-kill-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	state, sock, path := filepath.Join(dir, "state"), filepath.Join(dir, "moat.sock"), filepath.Join(dir, "audit.jsonl")
	ctx := context.Background()
	start := func() (*exec.Cmd, *client.Client) {
		cmd, c := daemonProcess(t, state, sock, "MOAT_TEST_AUDIT="+path)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := c.Sessions(ctx); err == nil {
				return cmd, c
			}
			if time.Now().After(deadline) {
				t.Fatal("the daemon does not answer")
			}
		}
	}
	first, c := start()
	s, err := c.CreateSession(ctx, &client.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"true"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	os.Remove(sock) // a killed daemon leaves its socket

	stop := func(cmd *exec.Cmd) {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("a daemon's clean stop: %v", err)
		}
	}
	second, _ := start()
	stop(second)
	// A daemon without sessions killed: its successor still says so.
	third, _ := start()
	third.Process.Signal(syscall.SIGKILL)
	third.Wait()
	os.Remove(sock)
	fourth, _ := start()
	stop(fourth)

	recs := readStream(t, path) // verifies the chain
	var starts []streamRecord
	reapedEnd, stops := false, 0
	for _, r := range recs {
		switch {
		case r.Type == audit.TypeDaemon && r.Event == "start":
			starts = append(starts, r)
		case r.Type == audit.TypeDaemon && r.Event == "stop":
			stops++
		case r.Type == audit.TypeSession && r.Event == "end" && r.Session == s.ID:
			reapedEnd = r.Reason == "reaped" && r.Tenant == s.Tenant && len(starts) == 2
		}
	}
	if len(starts) != 4 {
		t.Fatalf("%d daemon starts in the stream, want 4: %+v", len(starts), recs)
	}
	for _, i := range []int{0, 2} {
		if starts[i].Unclean || len(starts[i].Reaped) != 0 {
			t.Errorf("control: daemon %d, the first or after a clean stop, says the previous one stopped uncleanly: %+v", i+1, starts[i])
		}
	}
	if !starts[1].Unclean || len(starts[1].Reaped) != 1 || starts[1].Reaped[0] != s.ID || starts[1].PrevPID != first.Process.Pid {
		t.Errorf("the restarted daemon's start: %+v, want unclean after pid %d, session %s reaped", starts[1], first.Process.Pid, s.ID)
	}
	if !starts[3].Unclean || len(starts[3].Reaped) != 0 || starts[3].PrevPID != third.Process.Pid {
		t.Errorf("the start after a daemon without sessions was killed: %+v, want unclean after pid %d", starts[3], third.Process.Pid)
	}
	if !reapedEnd {
		t.Errorf("no end (reaped, tenant %s) of session %s after the second start", s.Tenant, s.ID)
	}
	if stops != 2 {
		t.Errorf("%d clean stops in the stream, want the second and the fourth daemon's", stops)
	}

	// The control of the verification: one record edited breaks it.
	data, _ := os.ReadFile(path)
	edited := bytes.Replace(data, []byte(`"reason":"reaped"`), []byte(`"reason":"deleted"`), 1)
	if bytes.Equal(edited, data) {
		t.Fatal("no reaped record to edit")
	}
	if _, _, err := audit.Verify(bytes.NewReader(edited)); err == nil {
		t.Error("control: the stream with a record edited verifies")
	}
}

// TestDaemonAuditFloodBounded: a session whose command makes refused
// requests without end gets no more than its bucket of records written
// to the daemon's audit stream; the rest are counted in dropped records,
// so that what was written and what was dropped add up to every request.
// The controls: the session's event stream holds every request, and
// another session's records, made after the flood, are written whole.
func TestDaemonAuditFloodBounded(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	const burst, n = 20, 150
	d, path := auditDaemon(t, daemon.Config{AuditBurst: burst, AuditRate: 1})
	ctx := context.Background()
	pol := "[network]\nmode = \"allow\"\nallow = [\"allowed.invalid\"]\n"
	began := time.Now() // the session's bucket fills from its making
	flood := d.create(t, &client.CreateSessionRequest{Policy: pol})
	script := fmt.Sprintf("i=0; while [ $i -lt %d ]; do curl -s -m 5 -o /dev/null http://refused$i.invalid/; i=$((i+1)); done", n)
	if _, _, rep := run(t, d.c, flood.ID, &client.ExecRequest{Args: []string{"sh", "-c", script}}); rep.ExitCode != 0 {
		t.Fatalf("the flood: %+v", rep)
	}
	inEvents := 0
	d.c.Events(ctx, flood.ID, 0, false, func(ev *client.AuditEvent) error {
		if ev.Type == audit.TypeNetwork {
			inEvents++
		}
		return nil
	})
	if inEvents != n {
		t.Fatalf("control: %d network records in the session's event stream, want %d", inEvents, n)
	}
	quiet := d.create(t, &client.CreateSessionRequest{Policy: pol})
	run(t, d.c, quiet.ID, &client.ExecRequest{Args: []string{"sh", "-c", "curl -s -m 5 -o /dev/null http://one.invalid/; curl -s -m 5 -o /dev/null http://two.invalid/"}})
	d.c.DeleteSession(ctx, flood.ID)
	d.c.DeleteSession(ctx, quiet.ID)
	elapsed := time.Since(began)

	written, dropped, lines, quietNet := 0, 0, 0, 0
	for _, r := range readStream(t, path) {
		switch r.Session {
		case flood.ID:
			lines++
			if r.Type == audit.TypeNetwork {
				written++
			}
			if r.Type == audit.TypeDropped {
				dropped += r.Types[audit.TypeNetwork]
			}
		case quiet.ID:
			if r.Type == audit.TypeNetwork {
				quietNet++
			}
		}
	}
	// The bucket, what it refilled at one a second, and what is written
	// besides: the session's start, the count of what was dropped at its
	// end, and its end.
	if most := burst + int(math.Ceil(elapsed.Seconds())) + 3; lines > most {
		t.Errorf("%d records of the flooding session written in %s, want at most %d", lines, elapsed, most)
	}
	if written+dropped != n || dropped == 0 {
		t.Errorf("%d network records written and %d counted as dropped, want %d in all, some dropped", written, dropped, n)
	}
	if quietNet != 2 {
		t.Errorf("control: %d network records of the quiet session written, want 2", quietNet)
	}
}
