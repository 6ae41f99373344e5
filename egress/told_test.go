package egress

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestRefusalRecordedBeforeTheClientKnows: a refusal is in the audit
// record by the time the client has its answer (a 403, a SOCKS reply), so
// a caller that reads the record when the command ends finds it, however
// slow the record's hook. The control: an allowed request's event comes
// at its end, and is not there yet when its client has the answer.
func TestRefusalRecordedBeforeTheClientKnows(t *testing.T) {
	s := startServers(t)
	tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, []string{"127.0.0.0/8"}))
	var mu sync.Mutex
	var recorded []Event
	tp.Audit = func(e Event) {
		time.Sleep(100 * time.Millisecond) // a slow hook (a full pipe, a disk)
		mu.Lock()
		recorded = append(recorded, e)
		mu.Unlock()
	}
	has := func(host, decision string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range recorded {
			if e.Host == host && e.Decision == decision {
				return true
			}
		}
		return false
	}

	if r, _ := tp.get(t, fmt.Sprintf("http://denied.test:%d/", s.httpPort), fmt.Sprintf("denied.test:%d", s.httpPort)); r.StatusCode != 403 || !has("denied.test", DecisionDeny) {
		t.Errorf("GET: status %d, recorded before the answer: %v", r.StatusCode, has("denied.test", DecisionDeny))
	}
	mu.Lock()
	recorded = nil
	mu.Unlock()
	if _, r := tp.connect(t, fmt.Sprintf("denied.test:%d", s.httpsPort)); r == nil || r.StatusCode != 403 || !has("denied.test", DecisionDeny) {
		t.Errorf("CONNECT: %v, recorded before the answer: %v", r, has("denied.test", DecisionDeny))
	}
	mu.Lock()
	recorded = nil
	mu.Unlock()
	if c, code := tp.socks(t, socksAtypDomain, []byte("denied.test"), s.httpPort); code != socksNotAllowed || !has("denied.test", DecisionDeny) {
		t.Errorf("SOCKS5: reply %d, recorded before the answer: %v", code, has("denied.test", DecisionDeny))
		c.Close()
	} else {
		c.Close()
	}

	// The control.
	if r, _ := tp.get(t, fmt.Sprintf("http://allowed.test:%d/", s.httpPort), fmt.Sprintf("allowed.test:%d", s.httpPort)); r.StatusCode != 200 || has("allowed.test", DecisionAllow) {
		t.Errorf("control: status %d, its event already there: %v", r.StatusCode, has("allowed.test", DecisionAllow))
	}
	time.Sleep(300 * time.Millisecond)
	if !has("allowed.test", DecisionAllow) {
		t.Errorf("control: the allowed request was never recorded")
	}
}
