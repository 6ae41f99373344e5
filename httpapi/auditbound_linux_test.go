package httpapi_test

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// floodPolicy lets through allowed.invalid, and denies denied.invalid by a
// rule: a request to it makes a decision record.
const floodPolicy = `[network]
mode = "allow"
allow = ["allowed.invalid", "denied.invalid"]

[[rules]]
name = "no-denied"
match = { host = "denied.invalid" }
decision = "deny"
reason = "flood test"
`

// flood runs, in session id, n requests to hosts the network policy
// refuses (a network record each) and, if decisions, n to a host a rule
// denies (a decision record each), and returns how many network and
// decision records the session's event stream holds.
func flood(t *testing.T, d *testDaemon, id string, n int, decisions bool) (network, decided int) {
	t.Helper()
	script := fmt.Sprintf("i=0; while [ $i -lt %d ]; do curl -s -m 5 -o /dev/null http://refused$i.invalid/; i=$((i+1)); done", n)
	if decisions {
		script = fmt.Sprintf("i=0; while [ $i -lt %d ]; do curl -s -m 5 -o /dev/null http://refused$i.invalid/; curl -s -m 5 -o /dev/null http://denied.invalid/$i; i=$((i+1)); done", n)
	}
	if _, _, rep := run(t, d.c, id, &client.ExecRequest{Args: []string{"sh", "-c", script}}); rep.ExitCode != 0 {
		t.Fatalf("the flood: %+v", rep)
	}
	d.c.Events(context.Background(), id, 0, false, func(ev *client.AuditEvent) error {
		switch ev.Type {
		case audit.TypeNetwork:
			network++
		case audit.TypeDecision:
			decided++
		}
		return nil
	})
	return network, decided
}

// TestDaemonAuditBoundsAllSessions: sessions each within their own
// bucket, flooding together, get no more network records written than
// the daemon's bucket holds; the rest are counted in dropped records (as
// over the daemon's rate), so that what was written and what was dropped
// add up to every request. The control: a daemon whose own bucket is
// large writes them all.
func TestDaemonAuditBoundsAllSessions(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	const burst, n = 20, 40
	for _, bounded := range []bool{true, false} {
		cfg := daemon.Config{AuditBurst: 1000, AuditRate: 1000, AuditDaemonBurst: burst, AuditDaemonRate: 1}
		if !bounded {
			cfg.AuditDaemonBurst = 100000
		}
		d, path := auditDaemon(t, cfg)
		began := time.Now()
		var ids []string
		for range 3 {
			s := d.create(t, &client.CreateSessionRequest{Policy: floodPolicy})
			ids = append(ids, s.ID)
			if got, _ := flood(t, d, s.ID, n, false); got != n {
				t.Fatalf("control: %d network records in the session's event stream, want %d", got, n)
			}
		}
		for _, id := range ids {
			d.c.DeleteSession(context.Background(), id)
		}
		elapsed := time.Since(began)
		written, dropped, overDaemon := 0, 0, 0
		for _, r := range readStream(t, path) {
			switch r.Type {
			case audit.TypeNetwork:
				written++
			case audit.TypeDropped:
				dropped += r.Types[audit.TypeNetwork]
				overDaemon += r.Daemon
			}
		}
		if written+dropped != 3*n {
			t.Errorf("bounded %v: %d network records written and %d counted as dropped, want %d in all", bounded, written, dropped, 3*n)
		}
		if !bounded {
			if dropped != 0 {
				t.Errorf("control: %d dropped with the daemon's bucket large", dropped)
			}
			continue
		}
		// Besides the network records, each session's start takes no
		// token, and its count of what was dropped one.
		if most := burst + int(math.Ceil(elapsed.Seconds())); written > most {
			t.Errorf("%d network records written in %s, want at most %d", written, elapsed, most)
		}
		if dropped == 0 || overDaemon != dropped {
			t.Errorf("%d dropped, %d of them over the daemon's rate; want some, all over it", dropped, overDaemon)
		}
	}
}

// TestDaemonAuditKeepsEveryDecision: a session flooding requests, a
// network record each (which may be dropped) and a rule's deny each
// (which may not), gets every deny written to the daemon's audit stream,
// however far over its rate; the network records beyond it are dropped
// and counted, and no decision is among what was dropped. The controls:
// the session's event stream holds every deny, and network records were
// dropped (the bucket was spent).
func TestDaemonAuditKeepsEveryDecision(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	// Each round of the flood asks for two tokens (its network record and
	// its deny) of a bucket that refills two a second: the network
	// records are dropped unless a round takes a second, which not even
	// an emulated guest's does. The denies wait: (n-burst)/rate seconds.
	const n = 20
	d, path := auditDaemon(t, daemon.Config{AuditBurst: 4, AuditRate: 2})
	s := d.create(t, &client.CreateSessionRequest{Policy: floodPolicy})
	_, decided := flood(t, d, s.ID, n, true)
	if decided != n {
		t.Fatalf("control: %d decisions in the session's event stream, want %d", decided, n)
	}
	d.c.DeleteSession(context.Background(), s.ID)
	denies, dropped, droppedDecisions := 0, 0, 0
	for _, r := range readStream(t, path) {
		switch {
		case r.Session != s.ID:
		case r.Type == audit.TypeDecision:
			denies++
		case r.Type == audit.TypeDropped:
			dropped += r.Types[audit.TypeNetwork]
			droppedDecisions += r.Types[audit.TypeDecision]
		}
	}
	if denies != n || droppedDecisions != 0 {
		t.Errorf("%d denies written, %d dropped; want all %d written", denies, droppedDecisions, n)
	}
	if dropped == 0 {
		t.Error("control: no network record dropped: the bucket was never spent")
	}
}
