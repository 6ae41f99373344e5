package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/moatbox/moat/internal/hostinfo"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestGVisorSession: a session under [sandbox] isolation = "gvisor" in
// network mode allow: its commands run on gVisor's kernel (not the
// host's, which a native session's command sees: the control), share
// /tmp and the workspace, reach an allowed host through moat's proxy, get
// its 403 for a denied one and cannot connect to the host's loopback
// directly; Close reports every connection.
func TestGVisorSession(t *testing.T) {
	gvisorUsable(t)
	w := newNetWorld(t)
	r := w.request(func(p *policy.Policy) {
		p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
		p.Sandbox.Isolation = policy.IsolationGVisor
	})
	ws := t.TempDir()
	os.Chown(ws, 1000, 1000)
	r.Policy.Workspace.Path = ws
	home, _ := os.UserHomeDir()
	if err := r.Policy.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: r.Policy, Resolver: r.Resolver, Dial: r.Dial, Audit: r.Audit})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	host := hostinfo.Kernel()
	out, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, "uname -r; echo kept > /tmp/state; echo made > "+ws+"/f")
	if err != nil || rep.ExitCode != 0 || rep.Backend != "gvisor" || strings.Contains(out, host) {
		t.Fatalf("first command: %v exit %d backend %s, saw %q (host kernel %s)", err, rep.ExitCode, rep.Backend, out, host)
	}
	for i := range 2 {
		out, _, _ := sessionSh(t, s, sandbox.ExecRequest{}, fmt.Sprintf(`cat /tmp/state
echo "allowed: $(curl -sS -m 10 http://allowed.test:%[1]d/)"
echo "denied: $(curl -sS -m 10 -o /dev/null -w '%%{http_code}' http://denied.test:%[1]d/)"
(exec 3<>/dev/tcp/127.0.0.1/%[1]d && echo DIRECT-CONNECTED) 2>/dev/null || echo direct-refused`, w.httpPort))
		for _, want := range []string{"kept", "allowed: PAGE-FROM-allowed.test", "denied: 403", "direct-refused"} {
			if !strings.Contains(out, want) {
				t.Errorf("command %d: output lacks %q:\n%s", i, want, out)
			}
		}
		if strings.Contains(out, "DIRECT-CONNECTED") {
			t.Errorf("command %d reached the host's loopback directly", i)
		}
	}
	if b, err := os.ReadFile(ws + "/f"); err != nil || string(b) != "made\n" {
		t.Errorf("workspace write: %q %v", b, err)
	}
	crep, err := s.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	allowed, denied := 0, 0
	for _, e := range crep.Network.Events {
		switch {
		case e.Host == "allowed.test" && e.Decision == "allow":
			allowed++
		case e.Host == "denied.test" && e.Decision == "deny":
			denied++
		}
	}
	if allowed != 2 || denied != 2 {
		t.Errorf("Close reported %d allowed and %d denied connections, want 2 and 2: %+v", allowed, denied, crep.Network.Events)
	}
	// Control: a native session's command sees the host's kernel.
	ns := newSession(t, t.TempDir(), nil)
	if out, _, err := sessionSh(t, ns, sandbox.ExecRequest{}, "uname -r"); err != nil || !strings.Contains(out, host) {
		t.Errorf("positive control: a native session saw %q, want the host's %s (%v)", out, host, err)
	}
}
