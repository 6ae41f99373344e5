//go:build linux

package native_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
)

// execLog records the exec calls one checker is asked about.
type execLog struct {
	mu    sync.Mutex
	calls []backend.ExecCall
	deny  string // a program refused
}

func (l *execLog) check(_ context.Context, c backend.ExecCall) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
	if len(c.Argv) > 0 && c.Argv[0] == l.deny {
		return errors.New("refused")
	}
	return nil
}

func (l *execLog) argv0s() (first []string, rest []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.calls {
		if c.First {
			first = append(first, c.Argv[0])
		} else {
			rest = append(rest, c.Argv[0])
		}
	}
	return first, rest
}

// TestSessionExecAttribution: in a session created with CheckExec, each
// command's execs go to the CheckExec of its own Exec, its first one
// marked First, a refusal failing the exec with EACCES; a session keeps
// no record of the hundreds of commands that left nothing behind. The
// session's own CheckExec is asked about nothing that can be told.
func TestSessionExecAttribution(t *testing.T) {
	var sess execLog
	s := spec(t, t.TempDir(), "/bin/true")
	inst, err := (&native.Backend{}).Create(context.Background(), s, backend.Stdio{CheckExec: sess.check})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Destroy(context.Background()) })
	run := func(l *execLog, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		p := &backend.ProcessSpec{Args: args, Env: s.Env, Dir: s.Dir}
		proc, err := inst.Exec(context.Background(), p, backend.Stdio{Stdout: &out, Stderr: &out, CheckExec: l.check})
		if err != nil {
			t.Fatalf("exec %q: %v", args, err)
		}
		if _, err := proc.Wait(); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	a, b := &execLog{deny: "uname"}, &execLog{}
	out := run(a, "/bin/sh", "-c", "uname -s >/dev/null; echo uname $?; id -u >/dev/null; echo id $?")
	if !strings.Contains(out, "uname 126") || !strings.Contains(out, "id 0") {
		t.Errorf("output: %q", out)
	}
	// Positive control: the same programs, another checker.
	if out := run(b, "/bin/sh", "-c", "uname -s >/dev/null; echo uname $?"); !strings.Contains(out, "uname 0") {
		t.Errorf("control output: %q", out)
	}
	for name, l := range map[string]*execLog{"a": a, "b": b} {
		first, rest := l.argv0s()
		if len(first) != 1 || first[0] != "/bin/sh" || len(rest) == 0 || rest[0] != "uname" {
			t.Errorf("%s was asked: first %q, then %q", name, first, rest)
		}
	}
	for i := 0; i < 300; i++ {
		run(&execLog{}, "/bin/true")
	}
	if n := native.SessionLeadersForTesting(inst); n >= 300 {
		t.Errorf("the session remembers %d commands", n)
	}
	if first, rest := sess.argv0s(); len(first)+len(rest) != 0 {
		t.Errorf("the session's checker was asked: %q %q", first, rest)
	}
}
