package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/internal/hostinfo"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// runIsolated runs args under policy p (edited), with the backend the
// policy's isolation names.
func runIsolated(t *testing.T, ws string, edit func(*policy.Policy), args ...string) result {
	t.Helper()
	return runIsolatedAllowing(t, ws, false, edit, args...)
}

// runIsolatedDegraded is runIsolated with AllowDegraded.
func runIsolatedDegraded(t *testing.T, ws string, edit func(*policy.Policy), args ...string) result {
	t.Helper()
	return runIsolatedAllowing(t, ws, true, edit, args...)
}

func runIsolatedAllowing(t *testing.T, ws string, degraded bool, edit func(*policy.Policy), args ...string) result {
	t.Helper()
	p := workspacePolicy(t, ws)
	edit(p)
	if err := p.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	var out, errb bytes.Buffer
	rep, err := sandbox.Run(context.Background(), &sandbox.Request{Policy: p, Args: args, AllowDegraded: degraded}, backend.Stdio{Stdout: &out, Stderr: &errb})
	if rep == nil {
		t.Fatalf("nil report (err %v)", err)
	}
	return result{rep, err, out.String(), errb.String()}
}

// TestGVisorRefusesWhatItCannotEnforce: under gvisor isolation a policy
// asking for what runsc cannot enforce here is refused before anything
// runs, naming it, even with AllowDegraded; runsc itself is not needed
// to refuse.
func TestGVisorRefusesWhatItCannotEnforce(t *testing.T) {
	ws := t.TempDir()
	for _, c := range []struct {
		name string
		edit func(*policy.Policy)
		want string
	}{
		{"tcp rules", func(p *policy.Policy) { p.Network.TCPConnect = &[]int{443} }, "TCP port rules"},
		{"pids", func(p *policy.Policy) { p.Limits.Pids = 64 }, "process limit"},
		{"disk", func(p *policy.Policy) { p.Limits.Disk = 16 << 20 }, "disk limit"},
		// gVisor's kernel has no Landlock, whatever the host's has: the
		// refusal says so rather than send the user to moat doctor.
		{"landlock required", func(p *policy.Policy) { p.Filesystem.Landlock = policy.LandlockRequired }, "the gvisor backend has no Landlock"},
		{"tcp rules wording", func(p *policy.Policy) { p.Network.TCPBind = &[]int{8080} }, "gVisor has no Landlock"},
		// runsc maps no ids: a host identity the policy chose was
		// silently not the command's.
		{"host uid", func(p *policy.Policy) { p.User.HostUID = 3000000000 }, "user.host_uid/host_gid 3000000000:2000000000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runIsolated(t, ws, func(p *policy.Policy) {
				p.Sandbox.Isolation, p.Harness.Builtin = policy.IsolationGVisor, []string{}
				c.edit(p)
			}, "/bin/true")
			if !errors.Is(r.err, sandbox.ErrRefused) || !strings.Contains(r.err.Error(), c.want) {
				t.Errorf("err = %v, want a refusal naming %q", r.err, c.want)
			}
			if r.rep.Backend != "gvisor" || r.rep.ExitCode != 125 {
				t.Errorf("report: backend %q, exit %d", r.rep.Backend, r.rep.ExitCode)
			}
			if c.name == "pids" {
				return // dropped with --allow-degraded, as documented
			}
			// Even with --allow-degraded (before, the TCP rules were
			// dropped and the command ran, tried).
			r = runIsolatedDegraded(t, ws, func(p *policy.Policy) {
				p.Sandbox.Isolation, p.Harness.Builtin = policy.IsolationGVisor, []string{}
				c.edit(p)
			}, "/bin/true")
			if !errors.Is(r.err, sandbox.ErrRefused) || !strings.Contains(r.err.Error(), c.want) && !strings.Contains(r.err.Error(), "TCP port rules") {
				t.Errorf("with --allow-degraded: err = %v, want a refusal naming %q", r.err, c.want)
			}
		})
	}
}

// gvisorUsable skips the test unless --isolation gvisor can run here.
func gvisorUsable(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("gvisor: runsc runs sandboxes for root only here (uid %d): rootless runsc has no network isolation; the run as root tests it", os.Geteuid())
	}
	if _, err := gvisor.Find(""); err != nil {
		t.Skipf("gvisor: %v", err)
	}
}

// TestGVisorAllowThroughProxy: under gvisor, network mode allow reaches
// an allowed host through moat's proxy (the positive control), a denied
// one gets the proxy's 403, and a direct connection to the host's
// loopback, where the server listens, fails: the proxy is the only way
// out.
func TestGVisorAllowThroughProxy(t *testing.T) {
	gvisorUsable(t)
	w := newNetWorld(t)
	req := w.request(func(p *policy.Policy) {
		p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
		p.Sandbox.Isolation, p.Harness.Builtin = policy.IsolationGVisor, []string{}
	})
	req.Backend = nil
	ws := t.TempDir()
	os.Chown(ws, 1000, 1000)
	req.Policy.Workspace.Path = ws
	home, _ := os.UserHomeDir()
	if err := req.Policy.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	req.Args = []string{"/bin/bash", "-c", fmt.Sprintf(`
echo "curl-allowed: $(curl -sS -m 10 http://allowed.test:%[1]d/)"
echo "curl-denied: $(curl -sS -m 10 -o /dev/null -w '%%{http_code}' http://denied.test:%[1]d/)"
(exec 3<>/dev/tcp/127.0.0.1/%[1]d && echo DIRECT-CONNECTED) 2>/dev/null || echo direct-refused
`, w.httpPort)}
	var out, errb bytes.Buffer
	rep, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	for _, want := range []string{"curl-allowed: PAGE-FROM-allowed.test", "curl-denied: 403", "direct-refused"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s%s", want, out.String(), errb.String())
		}
	}
	if strings.Contains(out.String(), "DIRECT-CONNECTED") || rep.Backend != "gvisor" {
		t.Errorf("backend %s:\n%s", rep.Backend, out.String())
	}
}

// TestGVisorRuns: --isolation gvisor runs the command on gVisor's kernel
// (its uname is not the host's); the same probe under native isolation,
// the positive control, sees the host's kernel.
func TestGVisorRuns(t *testing.T) {
	gvisorUsable(t)
	ws := t.TempDir()
	os.Chown(ws, 1000, 1000)
	host := hostinfo.Kernel()
	r := runIsolated(t, ws, func(p *policy.Policy) { p.Sandbox.Isolation, p.Harness.Builtin = policy.IsolationGVisor, []string{} }, "/bin/sh", "-c", "uname -r; id -u; echo made > f")
	if r.err != nil || r.rep.ExitCode != 0 || r.rep.Backend != "gvisor" {
		t.Fatalf("gvisor run: %v %+v %s", r.err, r.rep, r.stderr)
	}
	if strings.Contains(r.stdout, host) || !strings.Contains(r.stdout, "1000") {
		t.Errorf("gvisor run saw %q (host kernel %s)", r.stdout, host)
	}
	if b, err := os.ReadFile(ws + "/f"); err != nil || string(b) != "made\n" {
		t.Errorf("workspace write: %q %v", b, err)
	}
	r = runIsolated(t, ws, func(*policy.Policy) {}, "/bin/uname", "-r")
	if r.err != nil || !strings.Contains(r.stdout, host) {
		t.Errorf("positive control: native run saw %q, want the host's %s (%v)", r.stdout, host, r.err)
	}
}

// TestGVisorRefusesExecChecks: gVisor tells moat nothing of the programs a
// command starts, so a policy with command rules (the built-in set is on
// by default) is refused under gvisor, naming why and the ways out; with
// AllowDegraded it runs with the command line checked only, and the report
// says so. The positive control: the same run without rules runs
// undegraded (and TestGVisorRuns).
func TestGVisorRefusesExecChecks(t *testing.T) {
	gvisorUsable(t)
	ws := t.TempDir()
	os.Chown(ws, 1000, 1000)
	gv := func(p *policy.Policy) { p.Sandbox.Isolation = policy.IsolationGVisor }
	r := runIsolated(t, ws, gv, "/bin/true")
	if !errors.Is(r.err, sandbox.ErrRefused) || !strings.Contains(r.err.Error(), "cannot check the programs a command starts") || !strings.Contains(r.err.Error(), "--allow-degraded") {
		t.Fatalf("gvisor with the built-in rules: %v, want a refusal naming why", r.err)
	}
	p := workspacePolicy(t, ws)
	gv(p)
	rep, err := sandbox.Run(context.Background(), &sandbox.Request{Policy: p, Args: []string{"/bin/true"}, AllowDegraded: true}, backend.Stdio{})
	if err != nil || rep.ExitCode != 0 || !strings.Contains(strings.Join(rep.Degraded, "\n"), "exec checks") {
		t.Fatalf("degraded: %v %+v", err, rep)
	}
	// The command line is still checked: a denied one does not run.
	p.Rules = []policy.Rule{{Name: "no-true", Match: policy.Match{Command: []string{"true"}}, Decision: "deny", Reason: "test"}}
	rep, err = sandbox.Run(context.Background(), &sandbox.Request{Policy: p, Args: []string{"true"}, AllowDegraded: true}, backend.Stdio{})
	if err == nil || rep.Reason != "denied" {
		t.Errorf("a denied command line under degraded gvisor: %v, reason %q", err, rep.Reason)
	}
	r = runIsolated(t, ws, func(p *policy.Policy) { gv(p); p.Harness.Builtin = []string{} }, "/bin/true")
	if r.err != nil || len(r.rep.Degraded) > 0 {
		t.Errorf("gvisor without rules: %v, degraded %q", r.err, r.rep.Degraded)
	}
}

// TestGVisorCPULimitReported: a command that spins past the CPU-time
// limit under gvisor ends with reason cpu, as under native (the
// control), not as a plain SIGKILL: the sentry, as Linux, kills at the
// hard limit without SIGXCPU when the soft one equals it. The same
// spin under a cpu budget ends with reason budget, naming it.
func TestGVisorCPULimitReported(t *testing.T) {
	gvisorUsable(t)
	ws := t.TempDir()
	os.Chown(ws, 1000, 1000)
	spin := []string{"/bin/sh", "-c", "while :; do :; done"}
	for _, iso := range []string{policy.IsolationNative, policy.IsolationGVisor} {
		t.Run(iso, func(t *testing.T) {
			// A spin that ignores SIGXCPU is killed at the hard limit
			// with SIGKILL: still the CPU limit, where the command's CPU
			// time is known (not under gvisor: docs/security.md).
			spins := [][]string{spin}
			if iso == policy.IsolationNative {
				spins = append(spins, []string{"/bin/sh", "-c", `trap "" XCPU; while :; do :; done`})
			}
			for _, args := range spins {
				r := runIsolated(t, ws, func(p *policy.Policy) {
					p.Sandbox.Isolation, p.Harness.Builtin = iso, []string{}
					p.Limits.CPU = policy.Duration(time.Second)
					p.Limits.Wall = policy.Duration(time.Minute)
				}, args...)
				if r.err != nil || r.rep.Reason != string(backend.CauseCPU) || !slices.Contains(r.rep.LimitsHit, "cpu") {
					t.Errorf("%q under a 1s CPU limit: reason %q, limits hit %q, signal %v (%v)", args, r.rep.Reason, r.rep.LimitsHit, r.rep.Signal, r.err)
				}
			}
			r := runIsolated(t, ws, func(p *policy.Policy) {
				p.Sandbox.Isolation, p.Harness.Builtin = iso, []string{}
				p.Budgets.CPU = policy.Duration(time.Second)
				p.Limits.Wall = policy.Duration(time.Minute)
			}, spin...)
			if r.err != nil || r.rep.Reason != sandbox.ReasonBudget || r.rep.Budget != "cpu" {
				t.Errorf("spin under a 1s cpu budget: reason %q, budget %q (%v)", r.rep.Reason, r.rep.Budget, r.err)
			}
		})
	}
}

// TestGVisorSystemIDsRefused: gVisor has no id mapping, so the sandbox
// user's uid and gid are the host's own for every file bound in, where
// the native backend (as root) runs the command as user.host_uid and
// host_gid. A sandbox gid of a host system group would read what that
// group may (a shadow backup, TLS keys): it is refused under gvisor, by
// name. The controls: the same probe under native runs and cannot read
// the file, and gvisor with an ordinary gid runs.
func TestGVisorSystemIDsRefused(t *testing.T) {
	gvisorUsable(t)
	ws := t.TempDir()
	os.Chown(ws, 1000, 1000)
	dir := t.TempDir()
	const sysGID = 99 // a system group: below the host's first ordinary id
	if err := os.WriteFile(dir+"/group-only", []byte("GROUP-SECRET\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir+"/group-only", 0, sysGID); err != nil {
		t.Fatal(err)
	}
	probe := []string{"/bin/sh", "-c", "id -g; cat " + dir + "/group-only"}
	run := func(iso string, gid int) result {
		return runIsolated(t, ws, func(p *policy.Policy) {
			p.Sandbox.Isolation, p.Harness.Builtin = iso, []string{}
			p.User.GID = gid
			p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, dir)
		}, probe...)
	}
	r := run(policy.IsolationGVisor, sysGID)
	if strings.Contains(r.stdout, "GROUP-SECRET") {
		t.Errorf("gvisor with gid %d read a file only host group %d may: %q", sysGID, sysGID, r.stdout)
	}
	if !errors.Is(r.err, sandbox.ErrRefused) || !strings.Contains(r.err.Error(), "user.gid") {
		t.Errorf("gvisor with gid %d: %v, want a refusal naming user.gid", sysGID, r.err)
	}
	r = run(policy.IsolationNative, sysGID)
	if r.err != nil || r.rep.ExitCode == 0 || strings.Contains(r.stdout, "GROUP-SECRET") || !strings.Contains(r.stdout, fmt.Sprint(sysGID)) {
		t.Errorf("control: native with gid %d: %q exit %d (%v), want it run and refused the file", sysGID, r.stdout, r.rep.ExitCode, r.err)
	}
	r = run(policy.IsolationGVisor, 1000)
	if r.err != nil || !strings.Contains(r.stdout, "1000") || strings.Contains(r.stdout, "GROUP-SECRET") {
		t.Errorf("control: gvisor with gid 1000: %q (%v), want it run and refused the file", r.stdout, r.err)
	}
	// The uid likewise: a readonly workspace, which needs no owner.
	r = runIsolated(t, ws, func(p *policy.Policy) {
		p.Sandbox.Isolation, p.Harness.Builtin = policy.IsolationGVisor, []string{}
		p.Workspace.Mode = policy.WorkspaceReadOnly
		p.User.UID = 99
	}, "/bin/true")
	if !errors.Is(r.err, sandbox.ErrRefused) || !strings.Contains(r.err.Error(), "user.uid") {
		t.Errorf("gvisor with uid 99: %v, want a refusal naming user.uid", r.err)
	}
}

// TestGVisorDenyInSentryFiles: a denied path in what gVisor's kernel
// makes itself (its /proc, and the /sys and /dev runsc gives every
// sandbox) is hidden as under native, not skipped as a path the
// sandbox lacks. The controls: the same probe without the deny reads
// them under gvisor, and under native the denied file is hidden too.
func TestGVisorDenyInSentryFiles(t *testing.T) {
	gvisorUsable(t)
	ws := t.TempDir()
	os.Chown(ws, 1000, 1000)
	probe := []string{"/bin/sh", "-c", "head -c 9 /proc/cpuinfo; echo; ls /sys/devices/system/cpu | head -1"}
	deny := func(p *policy.Policy) {
		p.Filesystem.Deny = append(p.Filesystem.Deny, "/proc/cpuinfo", "/sys/devices/system/cpu")
	}
	for _, c := range []struct {
		iso  string
		deny bool
		want []string
		not  []string
	}{
		{policy.IsolationGVisor, true, nil, []string{"processor", "cpu0"}},
		{policy.IsolationGVisor, false, []string{"processor", "cpu0"}, nil},
		{policy.IsolationNative, true, nil, []string{"processor"}},
	} {
		r := runIsolated(t, ws, func(p *policy.Policy) {
			p.Sandbox.Isolation, p.Harness.Builtin = c.iso, []string{}
			if c.deny {
				deny(p)
			}
		}, probe...)
		if r.err != nil {
			t.Errorf("%s (deny %v): %v", c.iso, c.deny, r.err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("control: %s without the deny lacks %q: %q %s", c.iso, w, r.stdout, r.stderr)
			}
		}
		for _, n := range c.not {
			if strings.Contains(r.stdout, n) {
				t.Errorf("%s with the deny shows %q: %q", c.iso, n, r.stdout)
			}
		}
	}
}
