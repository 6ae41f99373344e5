//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/proctest"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// newSession creates a session over ws under the default policy changed
// by edit, closed at the end of the test.
func newSession(t *testing.T, ws string, edit func(*policy.Policy)) *sandbox.Session {
	t.Helper()
	p := policy.Default()
	p.Workspace.Path = ws
	if edit != nil {
		edit(p)
	}
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func sessionSh(t *testing.T, s *sandbox.Session, req sandbox.ExecRequest, script string) (string, *sandbox.Report, error) {
	t.Helper()
	req.Args = []string{"/bin/sh", "-c", script}
	var out bytes.Buffer
	rep, err := s.Exec(context.Background(), &req, backend.Stdio{Stdout: &out, Stderr: &out})
	if rep == nil {
		t.Fatalf("nil report (err %v)", err)
	}
	return out.String(), rep, err
}

// TestSessionDirect: a direct-mode session's commands share /tmp and the
// workspace, which they write in place; a command started in the
// background runs beside the others until signalled; Close leaves no
// process, and quarantines what the commands planted where a protected
// path belongs.
func TestSessionDirect(t *testing.T) {
	ws := newRepo(t)
	mountsBefore := countLines("/proc/self/mountinfo")
	s := newSession(t, ws, nil)
	if s.Workspace() != ws || s.ChangeSet() != nil {
		t.Errorf("Workspace %q ChangeSet %v, want %s and none", s.Workspace(), s.ChangeSet(), ws)
	}
	if out, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, "echo one > /tmp/t && echo two > made && id -u"); err != nil || rep.ExitCode != 0 || rep.Reason != "exit" {
		t.Fatalf("first command: %v %+v %s", err, rep, out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "made")); string(b) != "two\n" {
		t.Errorf("the workspace was not written in place: %q", b)
	}
	if out, _, _ := sessionSh(t, s, sandbox.ExecRequest{Env: []string{"EXTRA=x"}}, "cat /tmp/t; echo $EXTRA"); out != "one\nx\n" {
		t.Errorf("second command saw %q, want the first's /tmp file and its own env", out)
	}

	marker := fmt.Sprintf("%d.%d", 5000+os.Getpid()%1000, time.Now().UnixNano()%1000)
	bg, err := s.Start(context.Background(), &sandbox.ExecRequest{Args: []string{"sleep", marker}}, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, _ := sessionSh(t, s, sandbox.ExecRequest{}, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"); !strings.Contains(out, "sleep "+marker) {
		t.Errorf("the background command is not seen alive by the next:\n%s", out)
	}
	if err := bg.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if rep, err := bg.Wait(); err != nil || rep.Reason != "signal" || rep.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("signalled command: %v %+v", err, rep)
	}
	// A second one, left running, ends with the session.
	if _, err := s.Start(context.Background(), &sandbox.ExecRequest{Args: []string{"sleep", marker + "1"}}, backend.Stdio{}); err != nil {
		t.Fatal(err)
	}
	// Planted where git reads its configuration: quarantined at Close.
	_, last, err := sessionSh(t, s, sandbox.ExecRequest{}, "echo '[core]' > .git/config.worktree")
	if err != nil || last.ExitCode != 0 {
		t.Fatalf("plant: %v %+v", err, last)
	}
	rep, err := s.Close(context.Background())
	if err != nil || rep.Reason != "closed" {
		t.Fatalf("Close: %v %+v", err, rep)
	}
	// The closing report says what the commands ran under (it said 0
	// whatever they had, found by a tester); the last command's report
	// is the control.
	if rep.LandlockABI != last.LandlockABI {
		t.Errorf("Close: landlock_abi %d, the commands' %d", rep.LandlockABI, last.LandlockABI)
	}
	if len(rep.ProtectedCreated) != 1 || rep.ProtectedCreated[0] != ".git/config.worktree" {
		t.Errorf("Close quarantined %v, want .git/config.worktree", rep.ProtectedCreated)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git/config.worktree")); err == nil {
		t.Error("the planted file is still in the workspace")
	}
	if left := proctest.Gone(func() []int { return proctest.Find("sleep " + marker) }, 5*time.Second); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
	if m := countLines("/proc/self/mountinfo"); m != mountsBefore {
		t.Errorf("host mounts: %d before the session, %d after", mountsBefore, m)
	}
	if again, err2 := s.Close(context.Background()); again != rep || err2 != nil {
		t.Errorf("a second Close: %p %v, want the first's report", again, err2)
	}
	if _, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, "true"); !errors.Is(err, sandbox.ErrSessionEnded) || rep.Reason != "error" {
		t.Errorf("exec after Close: %v %+v", err, rep)
	}
}

// TestSessionOverlay: an overlay session's commands accumulate into one
// change set, and the workspace on the host stays as it was. Under a disk
// limit, where the changes are on the limit's tmpfs until the session
// ends, Close saves them into the change set.
func TestSessionOverlay(t *testing.T) {
	for _, disk := range []policy.Size{0, 16 << 20} {
		t.Run(fmt.Sprintf("disk=%d", disk), func(t *testing.T) {
			ws := t.TempDir()
			s := newSession(t, ws, func(p *policy.Policy) {
				p.Workspace.Mode = policy.WorkspaceOverlay
				p.Limits.Disk = disk
			})
			cs := s.ChangeSet()
			if cs == nil || s.Workspace() != "" {
				t.Fatalf("ChangeSet %v Workspace %q", cs, s.Workspace())
			}
			sessionSh(t, s, sandbox.ExecRequest{}, "echo a > first")
			out, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, "cat first && echo b > second")
			if err != nil || out != "a\n" || rep.ChangeSet == nil || rep.ChangeSet.ID != cs.ID {
				t.Fatalf("second command: %v %q %+v", err, out, rep.ChangeSet)
			}
			if _, err := os.Stat(filepath.Join(ws, "first")); err == nil {
				t.Error("an overlay session wrote the workspace")
			}
			rep, err = s.Close(context.Background())
			if err != nil || rep.ChangeSet == nil {
				t.Fatalf("Close: %v %+v", err, rep)
			}
			for _, f := range []string{"first", "second"} {
				if _, err := os.Stat(filepath.Join(cs.Dir, "upper", f)); err != nil {
					t.Errorf("%s is not in the change set: %v", f, err)
				}
			}
		})
	}
}

// TestSessionRulesAndLimits: the policy's rules decide each command of a
// session; a command's wall clock ends it alone; a refused system call is
// in that command's report.
func TestSessionRulesAndLimits(t *testing.T) {
	ws := t.TempDir()
	s := newSession(t, ws, func(p *policy.Policy) {
		p.Rules = append(p.Rules, policy.Rule{Match: policy.Match{Command: []string{"echo", "forbidden"}}, Decision: "deny", Reason: "test"})
	})
	_, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, "echo forbidden")
	if !errors.Is(err, sandbox.ErrDenied) || rep.Reason != "denied" {
		t.Errorf("denied command: %v %+v", err, rep)
	}
	if out, _, err := sessionSh(t, s, sandbox.ExecRequest{}, "echo allowed"); err != nil || out != "allowed\n" {
		t.Errorf("control: %v %q", err, out)
	}
	_, rep, _ = sessionSh(t, s, sandbox.ExecRequest{Wall: 200 * time.Millisecond}, "sleep 30")
	if rep.Reason != "timeout" {
		t.Errorf("wall limit: reason %q", rep.Reason)
	}
	out, rep, _ := sessionSh(t, s, sandbox.ExecRequest{}, "unshare -r true 2>&1; echo done")
	found := false
	for _, d := range rep.Denials {
		found = found || d.What == "unshare" && d.Rule != "" && d.Profile == "default"
	}
	if !found || !strings.Contains(out, "done") {
		t.Errorf("the refused unshare is not in the command's report: %+v\n%s", rep.Denials, out)
	}
	// Control: a command that makes no such call reports none.
	if _, rep, _ := sessionSh(t, s, sandbox.ExecRequest{}, "true"); len(rep.Denials) != 0 {
		t.Errorf("denials of a quiet command: %+v", rep.Denials)
	}
}

// TestSessionDenialsAreTheirCommands: in a session, a refused system
// call is in the report of the command whose process made it, not in
// that of a command running beside it; both with the exec checks (the
// host answers the filter) and without them (init does). The controls:
// the refusing command's report has its refusals, made all the while the
// quiet one ran (it ends after it).
func TestSessionDenialsAreTheirCommands(t *testing.T) {
	for _, tc := range []struct {
		name    string
		builtin []string
	}{{"host", nil}, {"init", []string{}}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, t.TempDir(), func(p *policy.Policy) {
				if tc.builtin != nil {
					p.Harness.Builtin = tc.builtin
				}
			})
			type result struct {
				out string
				rep *sandbox.Report
			}
			noisy := make(chan result, 1)
			go func() {
				req := sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", "touch started; i=0; while [ $i -lt 40 ]; do unshare -r true 2>/dev/null; i=$((i+1)); sleep 0.05; done; echo looped"}}
				var out bytes.Buffer
				rep, _ := s.Exec(context.Background(), &req, backend.Stdio{Stdout: &out, Stderr: &out})
				noisy <- result{out.String(), rep}
			}()
			out, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, "while [ ! -e started ]; do sleep 0.01; done; sleep 0.5; echo quiet")
			if err != nil || out != "quiet\n" {
				t.Fatalf("the quiet command: %v %q", err, out)
			}
			if len(rep.Denials) != 0 {
				t.Errorf("the quiet command's report has its neighbour's refusals: %+v", rep.Denials)
			}
			r := <-noisy
			if r.rep == nil || !strings.Contains(r.out, "looped") {
				t.Fatalf("control: the refusing command: %+v %q", r.rep, r.out)
			}
			found := 0
			for _, d := range r.rep.Denials {
				if d.What == "unshare" {
					found = d.Count
				}
			}
			if found < 20 {
				t.Errorf("control: the refusing command's report has %d refused unshare calls, want 40: %+v", found, r.rep.Denials)
			}
		})
	}
}

// TestSessionCgroupLimits: a process limit holds for the whole session:
// what one command left running counts against the next one's forks.
func TestSessionCgroupLimits(t *testing.T) {
	ws := t.TempDir()
	s := newSession(t, ws, func(p *policy.Policy) { p.Limits.Pids = 32 })
	spawn := "for i in $(seq 20); do sleep 60 & done 2>&1; echo spawned"
	// Alone, a command may start twenty processes (the control)...
	bg, err := s.Start(context.Background(), &sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", spawn + "; wait"}}, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	defer bg.Signal(syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _, _ := sessionSh(t, s, sandbox.ExecRequest{}, "grep -lx sleep /proc/[0-9]*/comm 2>/dev/null | wc -l")
		if strings.TrimSpace(out) == "20" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first command's twenty processes did not all start: %s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// ...but not beside another that holds twenty already (init's own
	// threads do not count).
	out, _, _ := sessionSh(t, s, sandbox.ExecRequest{}, spawn)
	if !strings.Contains(out, "fork") && !strings.Contains(out, "Resource temporarily unavailable") {
		t.Errorf("a second command could start twenty processes beside the first's under a limit of 32:\n%s", out)
	}
}

// TestSessionEgress: an allow-mode session's commands reach what the
// allowlist allows through the session's one proxy, and are refused the
// rest; each command's report names what was refused while it ran, and
// one that used no network names nothing (the control); Close reports
// every connection of the session.
func TestSessionEgress(t *testing.T) {
	w := newNetWorld(t)
	r := w.request(func(p *policy.Policy) { p.Network.AllowCIDRs = []string{"127.0.0.0/8"} })
	ws := t.TempDir()
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
	for i := range 2 {
		out, crep, _ := sessionSh(t, s, sandbox.ExecRequest{}, fmt.Sprintf(`curl -sS -m 10 http://allowed.test:%[1]d/; echo; curl -sS -m 10 -o /dev/null -w '%%{http_code}' http://denied.test:%[1]d/`, w.httpPort))
		if !strings.Contains(out, "PAGE-FROM-allowed.test") || !strings.Contains(out, "403") {
			t.Errorf("command %d: %s", i, out)
		}
		// (How many were allowed is counted as each connection closes,
		// which may come after the command's end.)
		want := fmt.Sprintf("network: refused denied.test:%d (default deny); ", w.httpPort)
		if crep.Network == nil || !strings.HasPrefix(crep.Network.Summary, want) || len(crep.Network.Refused) != 1 {
			t.Errorf("command %d's network report: %+v, want the summary %q", i, crep.Network, want)
		}
	}
	if _, crep, err := sessionSh(t, s, sandbox.ExecRequest{}, "true"); err != nil || crep.Network == nil || crep.Network.Summary != "" || len(crep.Network.Refused) != 0 {
		t.Errorf("a command that used no network: %v, network report %+v", err, crep.Network)
	}
	rep, err := s.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	allowed, denied := 0, 0
	for _, e := range rep.Network.Events {
		switch {
		case e.Host == "allowed.test" && e.Decision == "allow":
			allowed++
		case e.Host == "denied.test" && e.Decision == "deny":
			denied++
		}
	}
	if allowed != 2 || denied != 2 {
		t.Errorf("Close reported %d allowed and %d denied connections, want 2 and 2: %+v", allowed, denied, rep.Network.Events)
	}
}

// TestSessionSecrets: a session's commands use a secret through its
// proxy and never hold its value; an exec that would pass the value in
// its environment is refused, and one that passes something else runs
// (the control).
func TestSessionSecrets(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	port, roots, saw := apiServer(t)
	value := "s3cr3t-" + sandbox.NewRunID()
	t.Setenv("MOAT_TEST_API_TOKEN", value)
	p := policy.Default()
	p.Workspace.Path = t.TempDir()
	p.Network.Mode = policy.NetworkAllow
	p.Network.Allow = []string{"api.test"}
	p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
	p.Secrets = []policy.Secret{{Name: "API_TOKEN", Source: "env:MOAT_TEST_API_TOKEN", Hosts: []string{"api.test"}}}
	home, _ := os.UserHomeDir()
	if err := p.Resolve(p.Workspace.Path, home); err != nil {
		t.Fatal(err)
	}
	s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: p, SecretRoots: roots,
		Resolver: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if host == "api.test" {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, errors.New("no such host (test resolver)")
		},
		Dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", a.String())
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	script := fmt.Sprintf(`curl -sS -m 10 -H "Authorization: Bearer $API_TOKEN" https://api.test:%d/; echo; echo "inside: $API_TOKEN $EXTRA"`, port)
	out, _, err := sessionSh(t, s, sandbox.ExecRequest{Env: []string{"EXTRA=ok"}}, script)
	if err != nil || !slices.Contains(saw(), "Bearer "+value) || !strings.Contains(out, "server-saw[Bearer moat-secret-api_token-") ||
		!strings.Contains(out, "inside: moat-secret-api_token-") || !strings.Contains(out, " ok") {
		t.Errorf("%v, the server saw %q:\n%s", err, saw(), out)
	}
	if strings.Contains(out, value) {
		t.Errorf("the value is inside:\n%s", out)
	}
	if _, rep, err := sessionSh(t, s, sandbox.ExecRequest{Env: []string{"LEAK=x" + value}}, "echo $LEAK"); !errors.Is(err, sandbox.ErrRefused) || rep.Reason != "error" {
		t.Errorf("an exec passing the value in its environment: %v %+v", err, rep)
	}
}

// TestSessionHostRules: the policy's host rules hold for a session's
// requests as for a one-shot run's: a denied method is refused with 403,
// an asked path goes to the session's approver (refused without one), and
// the same destination's other requests pass (the positive control).
func TestSessionHostRules(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	w := newNetWorld(t)
	for _, approver := range []*fakeApprover{nil, {yes: true}} {
		r := w.request(func(p *policy.Policy) {
			p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
			p.Harness.Builtin = []string{} // its ask about curl -d is not this test's
			p.Rules = []policy.Rule{
				{Name: "no-post", Match: policy.Match{Host: "allowed.test", Method: "POST"}, Decision: "deny", Reason: "read only"},
				{Name: "ask-path", Match: policy.Match{Host: "allowed.test", Path: "/ask"}, Decision: "ask", Reason: "a person decides"},
			}
		})
		ws := t.TempDir()
		r.Policy.Workspace.Path = ws
		home, _ := os.UserHomeDir()
		if err := r.Policy.Resolve(ws, home); err != nil {
			t.Fatal(err)
		}
		req := &sandbox.SessionRequest{Policy: r.Policy, Resolver: r.Resolver, Dial: r.Dial, Audit: r.Audit}
		if approver != nil {
			req.Approver = approver
		}
		s, err := sandbox.Create(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		out, _, _ := sessionSh(t, s, sandbox.ExecRequest{}, fmt.Sprintf(`c() { curl -sS -m 10 -o /dev/null -w '%%{http_code} ' "$@"; }
c http://allowed.test:%[1]d/; c -X POST -d x http://allowed.test:%[1]d/; c http://allowed.test:%[1]d/ask`, w.httpPort))
		s.Close(context.Background())
		want := "200 403 403 "
		if approver != nil {
			want = "200 403 200 "
		}
		if out != want {
			t.Errorf("approver %v: got %q, want %q (GET, POST refused, the asked path)", approver != nil, out, want)
		}
	}
}

// TestSessionBudgets: a session's [budgets] hold across its commands: the
// runs budget refuses the command past it, the wall budget ends the
// command that spends it (reason budget) and refuses the next, and so does
// the output budget; a session without budgets runs the same commands (the
// positive control).
func TestSessionBudgets(t *testing.T) {
	for _, tc := range []struct {
		name, budgets string
		script        string
		first         string // the Reason of the command that spends it
	}{
		{"runs", "runs = 2", "true", "exit"},
		// The first command leaves less than its own length (on an
		// emulated machine, too, whose start-up costs more).
		{"wall", `wall = "4s"`, "sleep 2", "budget"},
		{"output", `output = "20KiB"`, "head -c 12000 /dev/zero", "budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policy.Parse("budgets.toml", []byte("[budgets]\n"+tc.budgets+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			s := newSession(t, t.TempDir(), func(q *policy.Policy) { q.Budgets = p.Budgets })
			var reasons []string
			for range 3 {
				_, rep, _ := sessionSh(t, s, sandbox.ExecRequest{}, tc.script)
				reasons = append(reasons, rep.Reason+":"+rep.Budget)
			}
			want := []string{"exit:", tc.first + ":" + map[bool]string{true: tc.name}[tc.first == "budget"], "budget:" + tc.name}
			if strings.Join(reasons, " ") != strings.Join(want, " ") {
				t.Errorf("reasons %q, want %q", reasons, want)
			}
			free := newSession(t, t.TempDir(), nil)
			for range 3 {
				if _, rep, err := sessionSh(t, free, sandbox.ExecRequest{}, tc.script); err != nil || rep.Reason != "exit" {
					t.Errorf("without budgets: %v %q", err, rep.Reason)
				}
			}
		})
	}
}

// TestSessionBudgetsConcurrent: commands of a session running at once
// spend its wall and output budgets together: two that each stay inside
// what was left when they started, but not together, are cut where the
// budget runs out. The same two commands with a budget that holds both
// run to the end (the control).
func TestSessionBudgetsConcurrent(t *testing.T) {
	for _, tc := range []struct {
		name, budgets, script string
		spent                 bool
	}{
		// Each sleeps less than the budget, both together more.
		{"wall", `wall = "4s"`, "sleep 3", true},
		{"wall control", `wall = "10s"`, "sleep 3", false},
		// Each writes less than the budget, both together more; the sleep
		// has both under way before either writes.
		{"output", `output = "20000"`, "sleep 1; head -c 12000 /dev/zero", true},
		{"output control", `output = "30000"`, "sleep 1; head -c 12000 /dev/zero", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policy.Parse("budgets.toml", []byte("[budgets]\n"+tc.budgets+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			s := newSession(t, t.TempDir(), func(q *policy.Policy) { q.Budgets = p.Budgets })
			var outs [2]bytes.Buffer
			var procs [2]*sandbox.Process
			for i := range procs {
				req := &sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", tc.script}}
				if procs[i], err = s.Start(context.Background(), req, backend.Stdio{Stdout: &outs[i], Stderr: &outs[i]}); err != nil {
					t.Fatal(err)
				}
			}
			var reasons []string
			total := 0
			for i, proc := range procs {
				rep, err := proc.Wait()
				if err != nil {
					t.Fatal(err)
				}
				reasons = append(reasons, rep.Reason+":"+rep.Budget)
				total += outs[i].Len()
			}
			cut := strings.Count(strings.Join(reasons, " "), "budget:")
			if tc.spent && cut == 0 || !tc.spent && cut != 0 {
				t.Errorf("reasons %q: a budget ended one %v, want %v", reasons, cut != 0, tc.spent)
			}
			if limit := int(p.Budgets.Output); limit > 0 && total > limit {
				t.Errorf("%d bytes of output in all, past the budget of %d", total, limit)
			}
		})
	}
}

// TestSessionWallBudgetStopsWhileAsked: in a session, as in a Run, the
// wall budget counts a command's own time, not the time a person takes to
// answer about a program it starts: an answer slower than the budget
// leaves the command to finish; a command that runs past the budget
// after a quick answer is ended by it (the control).
func TestSessionWallBudgetStopsWhileAsked(t *testing.T) {
	for _, tt := range []struct {
		name, budget, script string
		ap                   sandbox.Approver
		reason, spent        string
	}{
		// The wait is longer than the budget, the work well within it even
		// on an emulated machine.
		{"without the wait", "2s", "x=-u; id $x >/dev/null; sleep 0.3; echo ok", slowApprover{2500 * time.Millisecond}, "exit", ""},
		{"with the wait", "1s", "x=-u; id $x >/dev/null; sleep 5", slowApprover{300 * time.Millisecond}, sandbox.ReasonBudget, "wall"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			p := execPolicy(t, ws, execRules+"[budgets]\nwall = \""+tt.budget+"\"\n")
			s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: p, Approver: tt.ap})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close(context.Background()) })
			start := time.Now()
			out, rep, _ := sessionSh(t, s, sandbox.ExecRequest{}, tt.script)
			if rep.Reason != tt.reason || rep.Budget != tt.spent {
				t.Errorf("reason %q budget %q, want %q %q (%s, after %s)", rep.Reason, rep.Budget, tt.reason, tt.spent, out, time.Since(start))
			}
		})
	}
}

// TestSessionWallKillsDetached: through a Session, a command ended at its
// wall clock takes with it what it started with setsid and by a double
// fork, whether the session checks execs (the default policy's rules) or
// not; the same processes left by a command that ends by itself live on.
func TestSessionWallKillsDetached(t *testing.T) {
	for _, rules := range []bool{true, false} {
		t.Run(fmt.Sprintf("rules=%v", rules), func(t *testing.T) {
			s := newSession(t, t.TempDir(), func(p *policy.Policy) {
				if !rules {
					p.Harness.Builtin = []string{}
				}
			})
			base := fmt.Sprintf("%d%d", 8000+os.Getpid()%1000, time.Now().UnixNano()%100000)
			detach := func(m, then string) string {
				return fmt.Sprintf(`setsid sh -c 'exec sleep %[1]s1' </dev/null >/dev/null 2>&1 &
sh -c 'setsid sh -c "sleep %[1]s2 & exit 0" </dev/null >/dev/null 2>&1 &'
sleep 1
%[2]s`, m, then)
			}
			find := func(m string) func() []int { return func() []int { return proctest.Find("sleep " + m) } }
			ctl := base + "0"
			if out, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, detach(ctl, "true")); err != nil || rep.ExitCode != 0 {
				t.Fatalf("control: %q, %+v, %v", out, rep, err)
			}
			m := base + "1"
			_, rep, _ := sessionSh(t, s, sandbox.ExecRequest{Wall: 3 * time.Second}, detach(m, "while :; do sleep 0.05; done"))
			if rep.Reason != "timeout" {
				t.Fatalf("reason %q, want timeout", rep.Reason)
			}
			for _, n := range []string{"1", "2"} {
				if left := proctest.Gone(find(m+n), 5*time.Second); len(left) > 0 {
					t.Errorf("sleep %s%s (pids %v) outlived its command", m, n, left)
				}
			}
			// A command its caller cancels (a client that went) is ended
			// as one at a limit is.
			m = base + "3"
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			var out bytes.Buffer
			rep, _ = s.Exec(ctx, &sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", detach(m, "while :; do sleep 0.05; done")}}, backend.Stdio{Stdout: &out, Stderr: &out})
			if rep == nil || rep.Reason != "killed" {
				t.Fatalf("cancelled: report %+v, want reason killed", rep)
			}
			for _, n := range []string{"1", "2"} {
				if left := proctest.Gone(find(m+n), 5*time.Second); len(left) > 0 {
					t.Errorf("sleep %s%s (pids %v) outlived its cancelled command", m, n, left)
				}
			}
			for _, n := range []string{"1", "2"} {
				if len(find(ctl+n)()) == 0 {
					t.Errorf("control: sleep %s%s is gone", ctl, n)
				}
			}
		})
	}
}

// TestDeleteInTheSandboxsOwnTmp: the built-in delete-outside rule does not
// ask about rm -rf of a directory in the sandbox's own /tmp, as a
// script's cleanup spells it (found by a tester: t=$(mktemp -d); rm -rf
// "$t" was refused in every run), in a run and in a session. The control,
// in both: rm -rf in a read_write path, spelt the same way or through a
// link in /tmp or in the workspace to it (/tmp/l/sub, /tmp/l2/, l/sub),
// is still refused without an approver, and its files stay; the link
// itself is removed, and rm -rf through a link that stays in /tmp or in
// the workspace runs. So is a link into /proc (a descriptor of the
// read_write path), and rm started by another name (a link to it, exec
// -a, a script whose #! line is rm). A run whose command line is rm -rf
// l/sub (or ./del, or a script ./s on l/sub, or fd/sub) is
// refused at its exec, with a workspace link that stays inside (the
// control) let through.
func TestDeleteInTheSandboxsOwnTmp(t *testing.T) {
	ws, data := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(data, "sub", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `t=$(mktemp -d) && mkdir "$t/x" && rm -rf "$t"; test -e "$t" && echo tmp kept || echo tmp gone
d=` + data + `/sub; rm -rf "$d" 2>/dev/null; echo data $?
rm -f /tmp/l /tmp/l2; ln -s ` + data + ` /tmp/l && rm -rf /tmp/l/sub 2>/dev/null; echo through a link $?
ln -s ` + data + ` /tmp/l2 && rm -rf /tmp/l2/ 2>/dev/null; echo a link named with a slash $?
rm -rf /tmp/l && test ! -L /tmp/l && echo the link itself gone
rm -f l in; ln -s ` + data + ` l && rm -rf l/sub 2>/dev/null; echo through a workspace link $?
mkdir -p real/y && ln -s real in && rm -rf in/y; echo within the workspace $?
mkdir -p /tmp/r/y && ln -sfn /tmp/r /tmp/l3 && rm -rf /tmp/l3/y; echo within tmp $?
rm -f fd del; exec 3<` + data + `; ln -s /proc/self/fd/3 fd && rm -rf fd/sub 2>/dev/null; echo through a descriptor $?
ln -s "$(command -v rm)" del && ./del -rf l/sub 2>/dev/null; echo rm by another name $?
bash -c 'exec -a other rm -rf l/sub' 2>/dev/null; echo rm under another argv0 $?
printf '#!%s -rf\n' "$(command -v rm)" > s && chmod +x s && ./s l/sub 2>/dev/null; echo rm as a script interpreter $?`
	check := func(how, out string) {
		t.Helper()
		if !strings.Contains(out, "tmp gone\n") {
			t.Errorf("%s: rm -rf of a mktemp directory did not run:\n%s", how, out)
		}
		for _, want := range []string{"data 126\n", "through a link 126\n", "a link named with a slash 126\n", "the link itself gone\n",
			"through a workspace link 126\n", "within the workspace 0\n", "within tmp 0\n",
			"through a descriptor 126\n", "rm by another name 126\n", "rm under another argv0 126\n", "rm as a script interpreter 126\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", how, want, out)
			}
		}
		if _, err := os.Stat(filepath.Join(data, "sub", "x")); err != nil {
			t.Fatalf("%s: the read_write path's files went: %v", how, err)
		}
	}

	p := execPolicy(t, ws, "")
	p.Filesystem.ReadWrite = []string{data}
	out, errb := runFromWorkspace(t, ws, p, script)
	check("run", out.String()+errb.String())

	s := newSession(t, ws, func(p *policy.Policy) { p.Filesystem.ReadWrite = []string{data} })
	var sout bytes.Buffer
	if _, err := s.Exec(context.Background(), &sandbox.ExecRequest{Args: []string{"sh", "-c", script}}, backend.Stdio{Stdout: &sout, Stderr: &sout}); err != nil {
		t.Fatal(err)
	}
	check("session", sout.String())

	// The command line itself: the host reads l/sub as the workspace's.
	for argv, want := range map[string]int{"rm -rf l/sub": 126, "./del -rf l/sub": 126, "./s l/sub": 126, "rm -rf fd/sub": 126, "rm -rf in/y": 0} {
		os.MkdirAll(filepath.Join(ws, "real", "y"), 0o755)
		req := &sandbox.Request{Backend: testBackend(), Policy: p, Args: strings.Fields(argv)}
		caller := sandbox.CurrentCaller()
		caller.Cwd = ws
		req.Caller = &caller
		var out bytes.Buffer
		rep, _ := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &out})
		if rep == nil || rep.ExitCode != want {
			t.Errorf("run %s: report %+v, want exit %d\n%s", argv, rep, want, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(data, "sub", "x")); err != nil {
		t.Fatalf("run: the read_write path's files went: %v", err)
	}
}
