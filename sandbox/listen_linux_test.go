package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// listenProbe listens on a TCP socket it never bound (which the kernel
// would bind to an ephemeral port), then on one bound to port 18090, then
// on a unix socket, and prints what each gave.
const listenProbe = `
import errno, os, socket, tempfile
def out(what, f):
    try:
        f()
        print(what, "ok")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
out("unbound", lambda: s.listen(5))
s6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
out("unbound6", lambda: s6.listen(5))
b = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
b.bind(("127.0.0.1", 18090))
out("bound", lambda: b.listen(5))
c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
out("accepts", lambda: (c.connect(("127.0.0.1", 18090)), b.accept()))
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
u.bind(os.path.join(tempfile.mkdtemp(), "s"))
out("unix", lambda: u.listen(5))
`

// TestListenWithoutBindRefused: Landlock's TCP bind rule checks the port
// a bind names, but a socket listened on unbound gets an ephemeral port
// with no bind at all; with network.tcp_bind set, each listen goes to the
// host, which refuses that one and makes every other (a bound TCP socket,
// a unix socket) itself. Every way a command is started carries it: the
// direct start, the init stage, a custom profile, with and without the
// exec check, and a session. The controls: without port rules, and with a
// rule that allows port 0, the unbound listen works.
func TestListenWithoutBindRefused(t *testing.T) {
	ws := t.TempDir()
	if r := run(t, ws, nil, "true"); r.rep.LandlockABI < 4 {
		t.Skipf("Landlock ABI %d has no TCP rules", r.rep.LandlockABI)
	}
	custom := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(custom, []byte(`{"defaultAction": "SCMP_ACT_ALLOW"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bind := func(ports ...int) func(*policy.Policy) {
		return func(p *policy.Policy) { p.Network.TCPBind = &ports }
	}
	noRules := func(p *policy.Policy) { p.Harness.Builtin = []string{} }
	const refused = "unbound EACCES\nunbound6 EACCES\nbound ok\naccepts ok\nunix ok\n"
	const allowed = "unbound ok\nunbound6 ok\nbound ok\naccepts ok\nunix ok\n"
	for _, tc := range []struct {
		name  string
		be    backend.Backend
		edits []func(*policy.Policy)
		want  string
	}{
		{"no port rules", testBackend(), nil, allowed},
		{"port 0 allowed", testBackend(), []func(*policy.Policy){bind(0, 18090)}, allowed},
		{"direct", testBackend(), []func(*policy.Policy){bind(18090)}, refused},
		{"direct without exec check", testBackend(), []func(*policy.Policy){bind(18090), noRules}, refused},
		{"init stage", &native.Backend{InitStage: true}, []func(*policy.Policy){bind(18090)}, refused},
		{"init stage without exec check", &native.Backend{InitStage: true}, []func(*policy.Policy){bind(18090), noRules}, refused},
		{"custom profile", testBackend(), []func(*policy.Policy){bind(18090), func(p *policy.Policy) { p.Syscalls.Profile = custom }}, refused},
		{"custom profile without exec check", testBackend(), []func(*policy.Policy){bind(18090), noRules, func(p *policy.Policy) { p.Syscalls.Profile = custom }}, refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy.Default()
			p.Workspace.Path = ws
			for _, e := range tc.edits {
				e(p)
			}
			home, _ := os.UserHomeDir()
			if err := p.Resolve(ws, home); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: tc.be, Policy: p, Args: []string{"python3", "-c", listenProbe}},
				backend.Stdio{Stdout: &out, Stderr: &errb})
			if err != nil {
				t.Fatalf("run: %v\n%s", err, errb.String())
			}
			if out.String() != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s\nstderr: %s", out.String(), tc.want, errb.String())
			}
			if tc.want == refused {
				var why, hint string
				for _, d := range rep.Denials {
					if d.What == "listen" {
						why, hint = d.Rule, d.Hint
					}
				}
				if !strings.Contains(why, "network.tcp_bind") || !strings.Contains(hint, "--tcp-bind 0") {
					t.Errorf("the report does not say why listen was refused, and how to allow it: %+v", rep.Denials)
				}
			}
		})
	}
	t.Run("session", func(t *testing.T) {
		s := newSession(t, ws, bind(18090))
		req := sandbox.ExecRequest{Args: []string{"python3", "-c", listenProbe}}
		var out bytes.Buffer
		if _, err := s.Exec(context.Background(), &req, backend.Stdio{Stdout: &out, Stderr: &out}); err != nil {
			t.Fatal(err)
		}
		if out.String() != refused {
			t.Errorf("got:\n%s\nwant:\n%s", out.String(), refused)
		}
	})
}
