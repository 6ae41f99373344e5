package audit

import (
	"testing"
	"time"
)

// A stream over its rate drops what may be dropped, counting it, and
// keeps what may not, waiting for its token; the count comes before the
// next record written, and at the end.
func TestLimiterDropsAndKeeps(t *testing.T) {
	var out []any
	l := &Limiter{Rate: 20, Burst: 3, Write: func(r any) { out = append(out, r) },
		WriteDropped: func(d Dropped) { out = append(out, d) }}
	// Positive control: within the burst every record is written.
	for range 3 {
		l.Add(NetworkRecord{Type: TypeNetwork}, TypeNetwork, false)
	}
	if len(out) != 3 {
		t.Fatalf("within the burst: %d records written, want 3", len(out))
	}
	for range 5 {
		l.Add(NetworkRecord{Type: TypeNetwork}, TypeNetwork, false)
	}
	l.Add(DenialRecord{Type: TypeDenial}, TypeDenial, false)
	if len(out) != 3 {
		t.Fatalf("over the rate: %d records written, want the 3 of the burst", len(out))
	}
	start := time.Now()
	l.Add(Decision{Type: TypeDecision, Verdict: "deny"}, TypeDecision, true)
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Errorf("a kept record over the rate was written after %v: it should wait for a token", waited)
	}
	if len(out) != 5 {
		t.Fatalf("after a kept record: %d written, want the count of the dropped and the record: %#v", len(out), out)
	}
	d, ok := out[3].(Dropped)
	if !ok || d.Count != 6 || d.Types[TypeNetwork] != 5 || d.Types[TypeDenial] != 1 || d.Type != TypeDropped {
		t.Fatalf("the count of what was dropped: %#v", out[3])
	}
	if _, ok := out[4].(Decision); !ok {
		t.Fatalf("the kept record: %#v", out[4])
	}
	// What is dropped after it is counted at the end, before the last
	// record.
	l.Add(NetworkRecord{Type: TypeNetwork}, TypeNetwork, false)
	l.Finish(RunRecord{Type: TypeRun})
	if len(out) != 7 {
		t.Fatalf("at the end: %#v", out[5:])
	}
	if d, ok := out[5].(Dropped); !ok || d.Count != 1 {
		t.Fatalf("the count at the end: %#v", out[5])
	}
	if _, ok := out[6].(RunRecord); !ok {
		t.Fatalf("the last record: %#v", out[6])
	}
}

// A shared bucket bounds several streams together: one stream's records
// that may be dropped are once it is empty, though its own has tokens.
func TestLimiterShared(t *testing.T) {
	var shared Bucket
	var out []any
	mk := func() *Limiter {
		return &Limiter{Rate: 1, Burst: 100, Shared: &shared, SharedRate: 0.001, SharedBurst: 4,
			Write: func(r any) { out = append(out, r) }, WriteDropped: func(d Dropped) { out = append(out, d) }}
	}
	a, b := mk(), mk()
	a.Add(NetworkRecord{}, TypeNetwork, false)
	a.Add(NetworkRecord{}, TypeNetwork, false)
	b.Add(NetworkRecord{}, TypeNetwork, false)
	b.Add(NetworkRecord{}, TypeNetwork, false)
	if len(out) != 4 {
		t.Fatalf("within the shared burst: %d written, want 4", len(out))
	}
	b.Add(NetworkRecord{}, TypeNetwork, false)
	b.Finish(nil)
	if len(out) != 5 {
		t.Fatalf("over the shared bucket: %#v", out[4:])
	}
	if d, ok := out[4].(Dropped); !ok || d.Count != 1 || d.Daemon != 1 {
		t.Fatalf("the count over the shared bucket: %#v", out[4])
	}
}
