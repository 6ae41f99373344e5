package httpapi_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// servePaths serves "served PATH" on 127.0.0.1 for the test, and returns
// its port.
func servePaths(t *testing.T) int {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "served "+r.URL.Path)
	}))
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return l.Addr().(*net.TCPAddr).Port
}

// TestPooledSessionAsks: the asks of a session claimed from the warm pool
// wait as pending approvals of that session, as a fresh session's do, and
// the answer given through the approvals API decides: approved, the
// command runs or the request passes; denied, it is refused with the
// rule. Both kinds of ask: a command's, whose approver comes with the
// exec request, and a request of its proxy's, whose approver the pool
// gave the sandbox before anyone claimed it. The controls: a request to
// the same server that no rule asks about passes at once, and the
// session was claimed from the pool.
func TestPooledSessionAsks(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	port := servePaths(t)

	dir := t.TempDir()
	pol := `[harness]
builtin = []

[network]
mode = "allow"
allow = ["localhost"]
allow_cidrs = ["127.0.0.1/32", "::1/128"]

[[rules]]
name = "ship"
match = { command = ["echo", "ship"] }
decision = "ask"
reason = "shipping leaves this machine"

[[rules]]
name = "ask-path"
match = { host = "localhost", path = "/ask" }
decision = "ask"
reason = "a person decides"
`
	os.WriteFile(filepath.Join(dir, "tpl.toml"), []byte(pol), 0o600)
	cfg := daemon.Config{Tick: 20 * time.Millisecond, Approvals: true, ApprovalTimeout: 30 * time.Second}
	if err := testTemplates(&cfg, dir, "tpl=1"); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, cfg, nil)
	for deadline := time.Now().Add(20 * time.Second); d.m.PoolSizes()["tpl"] < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool did not fill")
		}
	}
	s := d.create(t, &client.CreateSessionRequest{Template: "tpl"})
	if n := d.m.PoolSizes()["tpl"]; n != 0 {
		t.Fatalf("the session was not claimed from the pool (%d left in it)", n)
	}
	ctx := context.Background()
	defer d.c.DeleteSession(ctx, s.ID)

	// pending waits for the session's pending approval, of the network or
	// of a command.
	pending := func(network bool) client.Approval {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			list, err := d.c.Approvals(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range list {
				if a.Session == s.ID && a.Network == network {
					return a
				}
			}
		}
		t.Fatalf("no pending approval (network %v) of session %s", network, s.ID)
		return client.Approval{}
	}
	curl := func(path string) []string {
		return []string{"curl", "-sS", "--noproxy", "", "-m", "20", "-w", " %{http_code}", fmt.Sprintf("http://localhost:%d%s", port, path)}
	}

	// The control: what no rule asks about passes without a person.
	out, errOut, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: curl("/free")})
	if out != "served /free 200" || rep.ExitCode != 0 {
		t.Fatalf("control: a request no rule asks about: %q %q %+v", out, errOut, rep)
	}

	// The proxy's ask: approved, the request passes; denied, refused.
	res := execAsync(d.c, s.ID, curl("/ask")...)
	a := pending(true)
	if !strings.Contains(a.Rule, "ask-path") {
		t.Errorf("the network approval: %+v", a)
	}
	if err := d.c.Approve(ctx, a.ID, &client.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.out != "served /ask 200" {
		t.Errorf("the approved request: %q %+v %v", r.out, r.rep, r.err)
	}
	res = execAsync(d.c, s.ID, curl("/ask")...)
	a = pending(true)
	if err := d.c.Deny(ctx, a.ID, &client.DenyRequest{Why: "not today"}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || strings.Contains(r.out, "served") || !strings.HasSuffix(r.out, " 403") {
		t.Errorf("the denied request: %q %+v %v", r.out, r.rep, r.err)
	}

	// A command's ask: approved, it runs; denied, it is refused.
	res = execAsync(d.c, s.ID, "echo", "ship", "it")
	a = pending(false)
	if !strings.Contains(a.Rule, "ship") || strings.Join(a.Command, " ") != "echo ship it" {
		t.Errorf("the command's approval: %+v", a)
	}
	if err := d.c.Approve(ctx, a.ID, &client.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.rep.ExitCode != 0 || r.out != "ship it\n" {
		t.Errorf("the approved command: %q %+v %v", r.out, r.rep, r.err)
	}
	res = execAsync(d.c, s.ID, "echo", "ship", "it")
	a = pending(false)
	if err := d.c.Deny(ctx, a.ID, &client.DenyRequest{Why: "not today"}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.rep.Reason != "denied" || r.out != "" || !strings.Contains(r.rep.Error, "ship") {
		t.Errorf("the denied command: %q %+v %v", r.out, r.rep, r.err)
	}
}

// TestExecStreamsNetworkAsk: an ask of the session's proxy (a request,
// which no one command is known to have made) is told in the stream of
// every exec running in the session, as a command's own ask is in its
// exec's, and the client's OnApproval can answer it; before, only the
// approvals list showed it, and a client reading the stream waited
// unknowing. The control: a request no rule asks about tells nothing.
func TestExecStreamsNetworkAsk(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	port := servePaths(t)
	pol := `[harness]
builtin = []

[network]
mode = "allow"
allow = ["localhost"]
allow_cidrs = ["127.0.0.1/32", "::1/128"]

[[rules]]
name = "ask-path"
match = { host = "localhost", path = "/ask" }
decision = "ask"
reason = "a person decides"
`
	d := startDaemon(t, daemon.Config{Approvals: true, ApprovalTimeout: 30 * time.Second}, nil)
	s := d.create(t, &client.CreateSessionRequest{Policy: pol})
	c := client.Unix(d.sock)
	defer c.Close()
	var told []client.Approval
	c.OnApproval = func(a client.Approval) {
		told = append(told, a)
		if err := d.c.Approve(context.Background(), a.ID, &client.ApproveRequest{}); err != nil {
			t.Errorf("approve %s: %v", a.ID, err)
		}
	}
	curl := func(path string) []string {
		return []string{"curl", "-sS", "--noproxy", "", "-m", "20", "-w", " %{http_code}", fmt.Sprintf("http://localhost:%d%s", port, path)}
	}
	if out, _, _ := run(t, c, s.ID, &client.ExecRequest{Args: curl("/free")}); out != "served /free 200" || len(told) != 0 {
		t.Fatalf("control: %q, told %+v", out, told)
	}
	out, errOut, rep := run(t, c, s.ID, &client.ExecRequest{Args: curl("/ask")})
	if out != "served /ask 200" || rep.ExitCode != 0 {
		t.Errorf("the asked request: %q %q %+v", out, errOut, rep)
	}
	if len(told) != 1 || !told[0].Network || !strings.Contains(told[0].Rule, "ask-path") {
		t.Errorf("told %+v, want the one network approval", told)
	}
}
