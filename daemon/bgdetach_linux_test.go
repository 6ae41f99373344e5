package daemon

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/moatbox/moat/internal/proctest"
)

// TestBackgroundLimitKillsDetached: a background command of a session
// whose execs are not checked ([harness] builtin = [] and no rules),
// ended at its wall clock or output limit, takes with it what it left by
// a double fork, in a session of its own whose leader has died, which
// only the host's record of each setsid ties to it. The controls: the
// same process left by a background command that ends by itself lives
// on, and background commands still run.
func TestBackgroundLimitKillsDetached(t *testing.T) {
	m := newManager(t, Config{Engine: Sandboxes})
	ctx := context.Background()
	tenant := TokenTenant("a")
	s, err := m.Create(ctx, tenant, &CreateRequest{Policy: "[harness]\nbuiltin = []\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Delete(ctx, tenant, s.ID)
	base := fmt.Sprintf("%d%d", 6000+os.Getpid()%1000, time.Now().UnixNano()%100000)
	find := func(m string) func() []int { return func() []int { return proctest.Find("sleep " + m) } }
	run := func(req *ExecRequest) string {
		t.Helper()
		p, err := s.Start(req, false)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
		case <-time.After(60 * time.Second):
			t.Fatal("the background command did not end")
		}
		rep, err := p.Result()
		if err != nil {
			t.Fatal(err)
		}
		return rep.Reason
	}
	detach := func(m, then string) []string {
		return []string{"/bin/sh", "-c", fmt.Sprintf(`sh -c 'setsid sh -c "sleep %[1]s & exit 0" </dev/null >/dev/null 2>&1 &'
i=0; until grep -q 'sleep.%[1]s' /proc/[0-9]*/cmdline 2>/dev/null; do i=$((i+1)); [ $i -lt 500 ] || exit 9; sleep 0.01; done
%[2]s`, m, then)}
	}

	ctl := base + "0"
	if why := run(&ExecRequest{Args: detach(ctl, "true")}); why != "exit" {
		t.Fatalf("control: reason %q", why)
	}
	for i, c := range []struct {
		reason string
		req    ExecRequest
		then   string
	}{
		{"timeout", ExecRequest{Wall: 3 * time.Second}, "while :; do sleep 0.05; done"},
		{"output", ExecRequest{Output: 64 << 10}, "sleep 0.2; yes"},
	} {
		mk := fmt.Sprintf("%s%d", base, i+1)
		c.req.Args = detach(mk, c.then)
		if why := run(&c.req); why != c.reason {
			t.Fatalf("reason %q, want %q", why, c.reason)
		}
		if left := proctest.Gone(find(mk), 5*time.Second); len(left) > 0 {
			t.Errorf("%s: sleep %s (pids %v) outlived its command", c.reason, mk, left)
		}
	}
	if len(find(ctl)()) == 0 {
		t.Errorf("control: sleep %s, left by a command that ended by itself, is gone", ctl)
	}
	if why := run(&ExecRequest{Args: []string{"true"}}); why != "exit" {
		t.Errorf("after the kills, a background command: reason %q", why)
	}
}
