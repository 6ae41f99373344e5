package sandbox_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// jsonFields counts the fields of struct type t that encode (not "-").
func jsonFields(t reflect.Type) int {
	n := 0
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("json") != "-" {
			n++
		}
	}
	return n
}

// TestAuditRecordsKeepTheirFields: the typed records encode exactly as
// the records moat wrote before they were types (the event or denial
// with a "type" in front), so streams old and new read the same.
func TestAuditRecordsKeepTheirFields(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	e := egress.Event{Time: at, RunID: "r1", Proto: egress.ProtoConnect, Host: "example.com", Port: 443, Addr: "1.2.3.4:443",
		SNI: "example.com", Decision: egress.DecisionDeny, Rule: "network.allow", Reason: "not allowed", BytesUp: 1, BytesDown: 2, Duration: 3,
		Method: "GET", Path: "/p", Secrets: []string{"TOKEN"}}
	// A daemon's stream tags each record with its session and tenant
	// (audit.Tag): two fields more, empty and left out elsewhere.
	if n, m := reflect.TypeOf(audit.NetworkRecord{}).NumField(), jsonFields(reflect.TypeOf(e))+3; n != m {
		t.Fatalf("audit.NetworkRecord has %d fields, egress.Event %d and type, session, tenant: a field is missing", n, m-3)
	}
	old, _ := json.Marshal(struct {
		Type string `json:"type"`
		egress.Event
	}{audit.TypeNetwork, e})
	got, _ := json.Marshal(sandbox.NetworkRecord(e))
	if string(got) != string(old) {
		t.Errorf("network record:\n got %s\nwant %s", got, old)
	}

	d := backend.Denial{Layer: "seccomp", What: "ptrace", Errno: "EPERM", Count: 2, Rule: "debugging", Profile: "default", Hint: "h", Fallback: "f"}
	if n, m := reflect.TypeOf(audit.DenialRecord{}).NumField(), reflect.TypeOf(d).NumField()+5; n != m {
		t.Fatalf("audit.DenialRecord has %d fields, backend.Denial %d and type, time, run_id, session, tenant: a field is missing", n, m-5)
	}
	p := policy.Default()
	p.Workspace.Path, p.Source = "/ws", "/ws/.moat.toml"
	rep := &sandbox.Report{RunID: "r1", Command: []string{"true"}, Policy: p, Reason: "exit", Backend: "native", Denials: []backend.Denial{d},
		LimitsHit: []string{}, Warnings: []string{"w"}, Degraded: []string{}, Seccomp: "default", LandlockABI: 6,
		ChangeSet: &sandbox.ChangeSetRef{ID: "c1", Session: "s", Dir: "/state/c1"}, ProtectedCreated: []string{".envrc"},
		Quarantined: []workspace.Quarantined{{Path: ".envrc", To: "/q/.envrc", Why: "protected"}}}
	recs := rep.AuditRecords(errors.New("boom"))
	if len(recs) != 2 {
		t.Fatalf("%d records, want a denial and the run", len(recs))
	}
	dr := recs[0].(audit.DenialRecord)
	old, _ = json.Marshal(struct {
		Type  string    `json:"type"`
		Time  time.Time `json:"time"`
		RunID string    `json:"run_id"`
		backend.Denial
	}{audit.TypeDenial, dr.Time, "r1", d})
	if got, _ := json.Marshal(dr); string(got) != string(old) {
		t.Errorf("denial record:\n got %s\nwant %s", got, old)
	}

	b, _ := json.Marshal(recs[1])
	var run map[string]any
	json.Unmarshal(b, &run)
	var keys []string
	for k := range run {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"backend", "change_set", "command", "degraded", "error", "exit_code", "landlock_abi", "limits_hit", "network", "policy",
		"protected_created", "quarantined", "reason", "run_id", "seccomp", "time", "type", "warnings", "workspace"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("run record fields %v, want %v", keys, want)
	}
	if run["type"] != "run" || run["policy"] != "/ws/.moat.toml" || run["workspace"] != "/ws" || run["error"] != "boom" || run["network"] != "none" {
		t.Errorf("run record %s", b)
	}
	cs, _ := json.Marshal(run["change_set"])
	q, _ := json.Marshal(run["quarantined"])
	if string(cs) != `{"dir":"/state/c1","id":"c1","session":"s"}` || string(q) != `[{"path":".envrc","to":"/q/.envrc","why":"protected"}]` {
		t.Errorf("change_set %s, quarantined %s", cs, q)
	}
}
