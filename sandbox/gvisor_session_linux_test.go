package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/internal/hostinfo"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
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
		p.Sandbox.Isolation, p.Harness.Builtin = policy.IsolationGVisor, []string{}
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

// TestGVisorOverlaySession: under gvisor, an overlay session's commands
// write a change set and never the workspace; the change set shows what
// they added, changed and removed, and applying it lands exactly that in
// the workspace. A direct-mode run of the same commands (the control)
// writes the workspace itself.
func TestGVisorOverlaySession(t *testing.T) {
	gvisorUsable(t)
	ws := t.TempDir()
	for name, data := range map[string]string{"keep": "old\n", "edit": "old\n", "gone": "old\n"} {
		os.WriteFile(filepath.Join(ws, name), []byte(data), 0o644)
	}
	chownTree(t, ws, 1000)
	s := newSession(t, ws, func(p *policy.Policy) {
		p.Sandbox.Isolation, p.Harness.Builtin = policy.IsolationGVisor, []string{}
		p.Workspace.Mode = policy.WorkspaceOverlay
	})
	script := "echo new > added && echo new > edit && rm gone && mkdir d && echo x > d/f"
	if out, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, script); err != nil || rep.ExitCode != 0 || rep.Backend != "gvisor" {
		t.Fatalf("overlay command: %v %+v %s", err, rep, out)
	}
	if out, _, _ := sessionSh(t, s, sandbox.ExecRequest{}, "cat edit added; test -e gone || echo no-gone"); out != "new\nnew\nno-gone\n" {
		t.Errorf("the next command sees %q", out)
	}
	for name, want := range map[string]string{"edit": "old\n", "gone": "old\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("the workspace's %s changed under an overlay: %q %v", name, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "added")); err == nil {
		t.Error("an overlay session wrote the workspace")
	}
	ref := s.ChangeSet()
	if _, err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	cs, err := workspace.Open(ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := cs.Changes()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, string(c.Kind)+" "+c.Path)
	}
	sort.Strings(got)
	want := []string{"added added", "added d", "added d/f", "deleted gone", "modified edit"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("changes %v, want %v", got, want)
	}
	if _, err := cs.Apply(nil, nil); err != nil {
		t.Fatalf("apply: %v", err)
	}
	cs.Discard()
	for name, want := range map[string]string{"edit": "new\n", "added": "new\n", "d/f": "x\n", "keep": "old\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("after apply, %s is %q %v, want %q", name, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "gone")); err == nil {
		t.Error("after apply, the removed file is still there")
	}
	// Control: a direct session writes the workspace itself.
	ws2 := t.TempDir()
	chownTree(t, ws2, 1000)
	d := newSession(t, ws2, func(p *policy.Policy) { p.Sandbox.Isolation, p.Harness.Builtin = policy.IsolationGVisor, []string{} })
	sessionSh(t, d, sandbox.ExecRequest{}, "echo new > added")
	if b, err := os.ReadFile(filepath.Join(ws2, "added")); err != nil || string(b) != "new\n" {
		t.Errorf("positive control: a direct session's write is not in the workspace: %q %v", b, err)
	}
}

// chownTree gives dir and everything in it to uid (runsc has no
// id-mapped mounts: a gvisor workspace is the sandbox user's).
func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGVisorTUNDropped: in a build with transparent egress, a gvisor run
// in allow mode, which cannot have the TUN device, runs with the proxy
// alone and says so, and still reaches an allowed host through it; a
// native run of the same request (the control) keeps its device.
func TestGVisorTUNDropped(t *testing.T) {
	dir := tunDir(t)
	gvisorUsable(t)
	w := newNetWorld(t)
	probe := []string{"/bin/sh", "-c", fmt.Sprintf("curl -sS -m 10 http://allowed.test:%d/; echo; cat /etc/resolv.conf", w.httpPort)}
	warned := func(rep *sandbox.Report) bool {
		for _, w := range rep.Warnings {
			if strings.Contains(w, "no transparent egress (the gvisor backend") {
				return true
			}
		}
		return false
	}
	req := w.request(func(p *policy.Policy) {
		p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
		p.Sandbox.Isolation, p.Harness.Builtin = policy.IsolationGVisor, []string{}
	})
	req.Backend, req.TUNDir, req.Args = nil, dir, probe
	ws := t.TempDir()
	os.Chown(ws, 1000, 1000)
	req.Policy.Workspace.Path = ws
	home, _ := os.UserHomeDir()
	if err := req.Policy.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &out})
	if err != nil || rep.Backend != "gvisor" || !warned(rep) || !strings.Contains(out.String(), "PAGE-FROM-allowed.test") || strings.Contains(out.String(), "198.18.0.2") {
		t.Errorf("gvisor: %v backend %s warnings %q\n%s", err, rep.Backend, rep.Warnings, out.String())
	}
	req = w.request(func(p *policy.Policy) { p.Network.AllowCIDRs = []string{"127.0.0.0/8"} })
	req.TUNDir, req.Args = dir, probe
	req.Policy.Workspace.Path = t.TempDir()
	if err := req.Policy.Resolve(req.Policy.Workspace.Path, home); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if rep, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &out}); err != nil || warned(rep) || !strings.Contains(out.String(), "198.18.0.2") {
		t.Errorf("positive control: native: %v warnings %q\n%s", err, rep.Warnings, out.String())
	}
}

// TestGVisorMemoryLimit: under gvisor, limits.memory bounds the whole
// sandbox: a run that fills it (its /tmp is the sentry's memory) ends with
// reason memory, enforced by a cgroup; the same run writing a little (the
// control) exits 0.
func TestGVisorMemoryLimit(t *testing.T) {
	gvisorUsable(t)
	if c := (&gvisor.Backend{}).Capabilities(); !c.Memory {
		t.Skipf("gvisor: no memory limit here: %s", c.MemoryWhy)
	}
	ws := t.TempDir()
	os.Chown(ws, 1000, 1000)
	for _, c := range []struct {
		mib    string
		reason string
	}{{"16", "exit"}, {"1024", "memory"}} {
		r := runIsolated(t, ws, func(p *policy.Policy) {
			p.Sandbox.Isolation, p.Harness.Builtin = policy.IsolationGVisor, []string{}
			p.Limits.Memory = 256 * policy.MiB
		}, "/bin/sh", "-c", "head -c "+c.mib+"m /dev/zero > /tmp/fill")
		if r.rep.Reason != c.reason || r.rep.Backend != "gvisor" || r.rep.LimitsEnforcedBy["memory"] != "cgroup" {
			t.Errorf("%s MiB under a 256 MiB limit: reason %q (want %q), backend %s, enforced by %v, err %v", c.mib, r.rep.Reason, c.reason, r.rep.Backend, r.rep.LimitsEnforcedBy, r.err)
		}
	}
}
