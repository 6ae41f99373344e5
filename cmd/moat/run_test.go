//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFailedOverlayRunLeavesNoChangeSet: a run that fails before its
// command ran removes the change set it created, a new session's too,
// but never a session that earlier runs filled.
func TestFailedOverlayRunLeavesNoChangeSet(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state)
	ws := t.TempDir()
	// Compile fails (no such profile), after the change set was made; a
	// missing --ro path fails in the sandbox's mount stage.
	for _, bad := range [][]string{{"--seccomp", "/no/such/profile.json"}, {"--rw", "/no/such/dir"}} {
		for _, session := range []string{"", "fresh"} {
			args := append([]string{"run", "--workspace-mode", "overlay"}, bad...)
			if session != "" {
				args = append(args, "--session", session)
			}
			code, out, errs := moat(t, ws, append(args, "--", "echo", "RAN")...)
			if code != exitMoatError || strings.Contains(out, "RAN") {
				t.Fatalf("%v: code %d out %q err %q, want a failed run", args, code, out, errs)
			}
			if sets := changeSets(t, state); len(sets) != 0 {
				t.Errorf("%v: change sets left behind: %v", args, sets)
			}
		}
	}
	// A session with an earlier run keeps its change set.
	if code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--session", "kept", "--", "sh", "-c", "echo x > new"); code != 0 {
		t.Fatalf("first run of the session: %d %s", code, errs)
	}
	if code, _, _ := moat(t, ws, "run", "--workspace-mode", "overlay", "--session", "kept", "--seccomp", "/no/such/profile.json", "--", "true"); code != exitMoatError {
		t.Fatalf("failing run of the session: code %d", code)
	}
	if sets := changeSets(t, state); len(sets) != 1 {
		t.Errorf("the session's change set: %v, want it kept", sets)
	}
	if _, err := os.Stat(filepath.Join(ws, "new")); err == nil {
		t.Errorf("the overlay run wrote to the real workspace")
	}
}

// TestRoundingDurationFlags: a limit that rounds to zero would be no
// limit at all; the flag is refused, naming it.
func TestRoundingDurationFlags(t *testing.T) {
	ws := t.TempDir()
	for _, flag := range []string{"--wall", "--cpu-time"} {
		code, out, errs := moat(t, ws, "run", flag, "0.4ns", "--", "echo", "RAN")
		if code != exitMoatError || strings.Contains(out, "RAN") || !strings.Contains(errs, "flag "+flag) || !strings.Contains(errs, "rounds to zero") {
			t.Errorf("%s 0.4ns: code %d out %q err %q", flag, code, out, errs)
		}
	}
	if code, _, errs := moat(t, ws, "run", "--wall", "1ns", "--", "true"); code == exitMoatError && strings.Contains(errs, "--wall") {
		t.Errorf("--wall 1ns refused: %s", errs)
	}
}

// TestRWRootRefused: --rw / is refused as --workspace / is, and --ro and
// --rw of a single file work.
func TestRWRootRefused(t *testing.T) {
	ws := t.TempDir()
	code, out, errs := moat(t, ws, "run", "--rw", "/", "--", "echo", "RAN")
	if code != exitMoatError || strings.Contains(out, "RAN") || !strings.Contains(errs, "flag --rw: filesystem.read_write") {
		t.Errorf("--rw /: code %d out %q err %q", code, out, errs)
	}
	dir := t.TempDir()
	ro, rw := filepath.Join(dir, "ro.txt"), filepath.Join(dir, "rw.txt")
	os.WriteFile(ro, []byte("ro\n"), 0o644)
	os.WriteFile(rw, []byte("rw\n"), 0o666)
	code, out, errs = moat(t, ws, "run", "--ro", ro, "--rw", rw, "--", "sh", "-c", "cat "+ro+" "+rw+"; echo more >> "+rw)
	if code != 0 || out != "ro\nrw\n" {
		t.Errorf("--ro FILE --rw FILE: code %d out %q err %q", code, out, errs)
	}
	if b, _ := os.ReadFile(rw); string(b) != "rw\nmore\n" {
		t.Errorf("--rw FILE: the file holds %q", b)
	}
}

// TestEarlyInterruptReported: Ctrl-C or SIGTERM at any moment of a run
// that keeps a record (--report, --audit) ends it with its report (reason
// killed, or the command dead of the signal once moat forwards it) and
// an audit record. moat takes them before it reads its policy; a signal
// before that, while Go's runtime starts, still ends moat as it would any
// Go program, so the test first waits for a sign of it: the "using
// policy" line of a workspace policy.
func TestEarlyInterruptReported(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, ".moat.toml"), []byte("[limits]\nwall = \"30s\"\n"), 0o644)
	if code, _, errs := moat(t, ws, "trust"); code != 0 {
		t.Fatalf("trust: %s", errs)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for _, delay := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 40 * time.Millisecond, 50 * time.Millisecond, 60 * time.Millisecond} {
			dir := t.TempDir()
			report, auditLog := filepath.Join(dir, "report.json"), filepath.Join(dir, "audit.jsonl")
			cmd := startAtPolicyLine(t, ws, nil, "run", "--report", report, "--audit", auditLog, "--", "sleep", "5")
			time.Sleep(delay)
			start := time.Now()
			cmd.Process.Signal(sig)
			cmd.Wait()
			what := fmt.Sprintf("%v after %v", sig, delay)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("%s: the run took %v to end", what, took)
			}
			var rep struct {
				Reason string  `json:"reason"`
				Error  string  `json:"error"`
				Signal *string `json:"signal"`
			}
			b, err := os.ReadFile(report)
			if err != nil || json.Unmarshal(b, &rep) != nil {
				t.Errorf("%s: no report: %v", what, err)
				continue
			}
			// Once forwarding has started the command gets the signal
			// and dies of it; before, the run is killed.
			forwarded := rep.Reason == "signal" && rep.Signal != nil && *rep.Signal == unix.SignalName(sig)
			if rep.Reason != "killed" && !forwarded {
				t.Errorf("%s: report %s, want reason killed (or the command dead of the forwarded signal)", what, b)
			}
			t.Logf("%s: reason %s %s", what, rep.Reason, rep.Error)
			var rec struct{ Type, Reason, RunID string }
			a, _ := os.ReadFile(auditLog)
			if json.Unmarshal(a, &rec) != nil || rec.Type != "run" || rec.Reason != rep.Reason {
				t.Errorf("%s: audit %q, want the run's record", what, a)
			}
		}
	}
}

// TestRunHelpGNUStyle: help spells flags --flag, grouped, with Docker's
// other spellings beside them and the built-in policy's defaults.
func TestRunHelpGNUStyle(t *testing.T) {
	code, out, errs := moat(t, t.TempDir(), "run", "--help")
	if code != 0 || errs != "" {
		t.Fatalf("code %d err %q", code, errs)
	}
	for _, want := range []string{"\n  --workspace-mode MODE\n", "\nLimits and identity:\n", "  -m, --memory SIZE\n", "(default: 10m)", "  --net, --network MODE\n", "  -v, --volume SRC[:SRC][:ro|rw]\n", "  -i, -t, -it, -ti, --rm"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(line, "  -") && len(l) > 2 && l[1] != '-' && l[2] != ',' && l[2] != ' ' && !strings.HasPrefix(l, "-it") {
			t.Errorf("a long flag with one dash: %q", line)
		}
	}
}

// TestUnknownFlagOneLine: a mistyped flag gets one line naming the
// closest flag, not the whole help.
func TestUnknownFlagOneLine(t *testing.T) {
	ws := t.TempDir()
	for args, want := range map[string]string{
		"run --netwrok none -- true":  "moat: unknown flag --netwrok (did you mean --network?); see moat run --help\n",
		"run --memroy 1G -- true":     "moat: unknown flag --memroy (did you mean --memory?); see moat run --help\n",
		"run --zzzzzz -- true":        "moat: unknown flag --zzzzzz; see moat run --help\n",
		"policy show --workspce /tmp": "moat: unknown flag --workspce (did you mean --workspace?); see moat policy show --help\n",
		"run --wall":                  "moat: flag --wall needs a value; see moat run --help\n",
		"run --memory= -- true":       "moat: flag --memory: invalid size \"\": want a number of bytes or a number with a unit, such as \"512MiB\" or \"1.5G\"\n",
	} {
		code, _, errs := moat(t, ws, strings.Fields(args)...)
		if code != exitMoatError || errs != want {
			t.Errorf("%s: code %d err %q, want %d %q", args, code, errs, exitMoatError, want)
		}
	}
}

// TestEmptyFlagValue: a flag given an empty value is refused, saying
// what it allows, rather than read as not given (which would keep the
// policy's value, or no limit, without a word).
func TestEmptyFlagValue(t *testing.T) {
	ws := t.TempDir()
	for flag, want := range map[string]string{
		"--tcp-bind":       `moat: flag --tcp-bind "": "" is not a port number; write ports separated by commas (22,8080) or none`,
		"--tcp-connect":    `moat: flag --tcp-connect "": "" is not a port number`,
		"--seccomp":        `moat: flag --seccomp: syscalls.profile: "" is not one of default, strict, unconfined`,
		"--landlock":       `moat: flag --landlock: filesystem.landlock: "" is not one of auto, required, best-effort, off`,
		"--workspace-mode": `moat: flag --workspace-mode: workspace.mode: "" is not one of direct, readonly, overlay, copy`,
		"--isolation":      `moat: flag --isolation: sandbox.isolation: "" is not one of native, gvisor`,
		"--net":            `moat: flag --net: network.mode: "" is not one of none, allow, host`,
		"--network":        `moat: flag --net: network.mode: "" is not one of none, allow, host`,
		"--workspace":      `moat: flag --workspace: empty path`,
		"--rw":             `moat: flag --rw: empty path`,
		"--ro":             `moat: flag --ro: empty path`,
		"--user":           `moat: flag --user "": moat takes numeric ids`,
		"-w":               `moat: flag -w: empty value; give a DIR inside the workspace`,
		"--cpus":           `moat: flag --cpus: invalid value "": invalid syntax`,
		"--output":         `moat: flag --output: invalid size "": want a number`,
		"--wall":           `moat: flag --wall: invalid duration "": want Go syntax`,
		"--policy":         `moat: invalid value "" for --policy: empty value; want a policy FILE`,
		"--audit":          `moat: invalid value "" for --audit: empty value; want a FILE`,
		"--report":         `moat: invalid value "" for --report: empty value; want a FILE`,
		"--session":        `moat: invalid value "" for --session: empty value; want a session NAME`,
	} {
		code, _, errs := moat(t, ws, "run", flag, "", "--", "true")
		if code != exitMoatError || !strings.HasPrefix(errs, want) {
			t.Errorf("run %s '': code %d err %q, want %d %q", flag, code, errs, exitMoatError, want)
		}
	}
	// The other commands' flags whose default is "" likewise.
	for _, args := range [][]string{
		{"serve", "--tenant-memory", ""}, {"serve", "--tenant-disk", ""}, {"serve", "--audit", ""},
		{"mcp", "--workspace-mode", ""}, {"mcp", "--policy", ""},
		{"session", "create", "--workspace-mode", ""}, {"session", "create", "--ttl", ""}, {"session", "create", "--policy", ""},
	} {
		name := args[len(args)-2]
		code, _, errs := moat(t, ws, args...)
		if code != 2 || !strings.Contains(errs, name+": empty value; give one (") && !strings.Contains(errs, `invalid value "" for `+name+": empty value; want a policy FILE") {
			t.Errorf("%v: code %d err %q, want 2 and an empty value refused", args, code, errs)
		}
	}
	// Controls: the same flags with values they allow.
	code, out, errs := moat(t, ws, "policy", "show", "--tcp-bind", "none", "--seccomp", "strict", "--landlock", "auto", "--workspace-mode", "overlay",
		"--isolation", "native", "--net", "none", "--cpus", "0.5", "--output", "1K", "--memory", "0")
	if code != 0 || !strings.Contains(out, "cpus = 0.5") || !strings.Contains(out, "output = '1KiB'") || !strings.Contains(out, "profile = 'strict'") {
		t.Errorf("policy show with values: code %d err %q\n%s", code, errs, out)
	}
}

// TestDashDashAsValue: a flag followed by -- was given no value (the
// flags end there): it is refused, not read as a file, limit or name
// "--"; the control is the same flag with its value before --.
func TestDashDashAsValue(t *testing.T) {
	ws := t.TempDir()
	for _, flag := range []string{"--policy", "--wall", "--workspace", "--audit", "--session", "--net"} {
		code, _, errs := moat(t, ws, "run", flag, "--", "true")
		if code != exitMoatError || !strings.Contains(errs, "needs a value (it took \"--\"") {
			t.Errorf("run %s -- true: code %d err %q, want the missing value refused", flag, code, errs)
		}
	}
	if code, out, errs := moat(t, ws, "policy", "show", "--wall", "90s", "--"); code != 0 || !strings.Contains(out, "wall = '1m30s'") {
		t.Errorf("policy show --wall 90s --: code %d err %q\n%s", code, errs, out)
	}
}

// TestRoundToZeroFlag: a size or CPU count that is not zero but reads as
// 0 (no limit) is refused; --output 1K is the control.
func TestRoundToZeroFlag(t *testing.T) {
	ws := t.TempDir()
	for _, args := range [][]string{{"--output", "0.0001K"}, {"--memory", "0.0000000001G"}, {"--disk", "0.0000000001G"}, {"--file-size", "0.0004k"},
		{"--cpus", "1e-400"}, {"--cpus", "0x1p-2000"}} {
		code, _, errs := moat(t, ws, append(append([]string{"policy", "show"}, args...), "--")...)
		if code != exitMoatError || !strings.Contains(errs, "rounds") || !strings.Contains(errs, "which means no limit") {
			t.Errorf("%v: code %d err %q, want a refusal", args, code, errs)
		}
	}
	code, out, errs := moat(t, ws, "policy", "show", "--output", "1K", "--file-size", "0.001K", "--cpus", "0.5")
	if code != 0 || !strings.Contains(out, "output = '1KiB'") || !strings.Contains(out, "file_size = '1B'") {
		t.Errorf("control: code %d err %q\n%s", code, errs, out)
	}
}

// TestDockerSpellings: docker run's flags that mean what one of moat's
// does are accepted; a volume elsewhere than its source and a -w
// outside the workspace are refused, saying why.
func TestDockerSpellings(t *testing.T) {
	ws, dir, dir2 := t.TempDir(), t.TempDir(), t.TempDir()
	code, out, errs := moat(t, ws, "policy", "show", "-it", "--rm", "-m", "512m", "--pids-limit", "10", "--cpus", "1.5",
		"--network", "none", "-e", "A=B", "-e", "LC_X", "-v", dir+":"+dir+":ro", "-v", dir2+":ro", "-v", "/var/tmp", "--read-only", "-u", "1234:1235")
	if code != 0 {
		t.Fatalf("policy show: code %d err %q", code, errs)
	}
	for _, want := range []string{"memory = '512MiB'", "pids = 10", "cpus = 1.5", "mode = 'none'", "A = 'B'", "'LC_X'",
		"'/etc', '" + dir + "', '" + dir2 + "']", "read_write = ['/var/tmp']", "mode = 'readonly'", "uid = 1234\ngid = 1235"} {
		if !strings.Contains(out, want) {
			t.Errorf("policy lacks %q:\n%s", want, out)
		}
	}
	sub := filepath.Join(ws, "sub")
	os.Mkdir(sub, 0o755)
	if code, out, errs := moat(t, ws, "run", "-w", "sub", "-it", "--", "pwd"); code != 0 || out != sub+"\n" {
		t.Errorf("-w sub: code %d out %q err %q", code, out, errs)
	}
	for _, c := range []struct{ args, want string }{
		{"-v " + dir + ":/mnt", "the destination must be " + dir},
		{"-v " + dir + ":" + dir + ":z", `mode "z" is not ro or rw`},
		{"-v " + filepath.Join(dir, "missing"), filepath.Join(dir, "missing") + " does not exist"},
		{"-w " + dir, "outside the workspace"},
		{"-u root", "numeric ids"},
		{"-u 0", "0 is root"},
		{"--read-only --workspace-mode overlay", "--read-only means --workspace-mode readonly"},
	} {
		code, out, errs := moat(t, ws, append(append([]string{"run"}, strings.Fields(c.args)...), "--", "echo", "RAN")...)
		if code != exitMoatError || strings.Contains(out, "RAN") || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: code %d out %q err %q, want one line containing %q", c.args, code, out, errs, c.want)
		}
	}
}

// runCgroups lists the cgroups named moat-* beneath this process's own
// cgroups, and beneath /sys/fs/cgroup/moat where root's runs go on pure
// cgroup v2: where the runs of a moat this test starts make theirs.
func runCgroups(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{"/sys/fs/cgroup/moat"}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		names := append(strings.Split(f[1], ","), f[1])
		if f[1] == "" {
			names = []string{"", "unified"}
		}
		for _, n := range names {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(n, "name="), f[2]))
		}
	}
	found := map[string]bool{}
	for _, d := range dirs {
		m, _ := filepath.Glob(filepath.Join(d, "moat-*"))
		for _, p := range m {
			found[p] = true
		}
	}
	return found
}

// leftBehind returns the cgroups of runCgroups that were not in before
// and, after a wait long enough for a dying sandbox's processes to leave
// and for any other run's new cgroup to be filled or removed, still
// exist with no process in them: those a run of the test left. Other
// runs on the machine (tests of other packages, other users) make and
// remove moat-* cgroups beside the test's; this never takes theirs.
func leftBehind(t *testing.T, before map[string]bool) []string {
	t.Helper()
	var cand []string
	for p := range runCgroups(t) {
		if !before[p] {
			cand = append(cand, p)
		}
	}
	if len(cand) == 0 {
		return nil
	}
	time.Sleep(2 * time.Second)
	var left []string
	for _, p := range cand {
		if b, err := os.ReadFile(filepath.Join(p, "cgroup.procs")); err == nil && len(bytes.TrimSpace(b)) == 0 {
			left = append(left, p)
		}
	}
	return left
}

// TestEarlySignalLeavesNoCgroup: Ctrl-C or SIGTERM at any moment of a run
// with a cgroup limit, even one that keeps no record, ends it with its
// cgroup removed. Before its handlers were installed at the policy for
// such a run, a signal in the first 50 ms ended moat by its default
// action and left the cgroup behind. The control: SIGKILL, which moat
// cannot take, does leave one, which the probe sees.
func TestEarlySignalLeavesNoCgroup(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, ".moat.toml"), []byte("[limits]\nwall = \"30s\"\nmemory = \"64MiB\"\n"), 0o644)
	if code, _, errs := moat(t, ws, "trust"); code != 0 {
		t.Fatalf("trust: %s", errs)
	}
	// The probe runs moat as a child, as the runs below do: in a
	// delegated cgroup that holds this test too, a child moat is not
	// alone there and gets no memory limit, where the test's own
	// process would.
	probe := exec.Command(os.Args[0], "run", "--", "true")
	probe.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
	probe.Dir = ws
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("no memory limit for a moat started by this test: %v: %s", err, out)
	}
	start := func(marker string) (*exec.Cmd, *bufio.Reader, *bufio.Reader) {
		cmd := exec.Command(os.Args[0], "run", "--", "sh", "-c", "echo "+marker+"; exec sleep 5")
		cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
		cmd.Dir = ws
		stdout, _ := cmd.StdoutPipe()
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, bufio.NewReader(stdout), bufio.NewReader(stderr)
	}
	ended := func(cmd *exec.Cmd, what string) {
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("%s: the run did not end", what)
		}
	}

	// The control: a SIGKILLed moat leaves its (empty) cgroup.
	before := runCgroups(t)
	cmd, stdout, stderr := start("STARTED")
	errc := make(chan string, 1)
	go func() { b, _ := io.ReadAll(stderr); errc <- string(b) }()
	if line, err := stdout.ReadString('\n'); err != nil || line != "STARTED\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the run did not start: %q %v; its stderr: %s", line, err, <-errc)
	}
	cmd.Process.Kill()
	ended(cmd, "SIGKILL")
	left := leftBehind(t, before)
	if len(left) == 0 {
		t.Fatal("control: a SIGKILLed run left no cgroup the probe sees")
	}
	for _, p := range left {
		unix.Rmdir(p)
	}

	before = runCgroups(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for _, delay := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 40 * time.Millisecond} {
			cmd, _, stderr := start("RAN")
			line, err := stderr.ReadString('\n')
			if err != nil || !strings.Contains(line, "using policy") {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("no policy line: %q %v", line, err)
			}
			go io.Copy(io.Discard, stderr)
			time.Sleep(delay)
			cmd.Process.Signal(sig)
			ended(cmd, fmt.Sprintf("%v after %v", sig, delay))
		}
	}
	for _, p := range leftBehind(t, before) {
		t.Errorf("an early SIGINT or SIGTERM left %s behind", p)
		unix.Rmdir(p)
	}
}

// TestMissingDenyAndReadOnlyRefused: moat run --deny or --ro of a path
// missing in the workspace is refused, naming the flag, in direct and
// overlay mode, before the command runs (it made the path and used it);
// once the path exists, the same flags run and protect it.
func TestMissingDenyAndReadOnlyRefused(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	secret, conf := filepath.Join(ws, "secret"), filepath.Join(ws, "conf")
	plant := []string{"--", "sh", "-c", "echo planted > secret; mkdir conf"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--deny", secret}, "moat: flag --deny: filesystem.deny[2]: " + secret + " does not exist"},
		{[]string{"--ro", conf}, "moat: flag --ro: filesystem.read_only[6]: " + conf + " does not exist"},
		{[]string{"--workspace-mode", "overlay", "--deny", secret}, "moat: flag --deny: filesystem.deny[2]: " + secret + " does not exist"},
	} {
		code, _, errs := moat(t, ws, append(append([]string{"run"}, c.args...), plant...)...)
		if code != exitMoatError || !strings.Contains(errs, c.want) || strings.Contains(errs, "goroutine") {
			t.Errorf("moat run %s: %d %q, want %q", strings.Join(c.args, " "), code, errs, c.want)
		}
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Fatalf("a refused run wrote the workspace: %v", ents)
	}
	os.WriteFile(secret, []byte("TOKEN\n"), 0o644)
	os.Mkdir(conf, 0o755)
	probe := []string{"--", "sh", "-c", "cat secret 2>/dev/null || echo HIDDEN; touch conf/y 2>/dev/null && echo WROTE || echo READONLY"}
	code, out, errs := moat(t, ws, append([]string{"run", "--deny", secret, "--ro", conf}, probe...)...)
	if code != 0 || out != "HIDDEN\nREADONLY\n" {
		t.Errorf("the existing paths: %d %q %q, want them hidden and read-only", code, out, errs)
	}
	// The probe without the flags reads and writes.
	if code, out, errs := moat(t, ws, append([]string{"run"}, probe...)...); code != 0 || out != "TOKEN\nWROTE\n" {
		t.Errorf("without the flags: %d %q %q", code, out, errs)
	}
}

// TestPolicyGivenOnce: --policy given twice is refused, naming both
// files, by every command that takes one; the last one given was the
// only one read, so a wrapper adding its own dropped the rules of the
// first (tried). The control: one --policy runs.
func TestPolicyGivenOnce(t *testing.T) {
	ws := t.TempDir()
	a := writePolicy(t, t.TempDir(), "[limits]\nwall = \"1m\"\n")
	b := writePolicy(t, t.TempDir(), "[limits]\nwall = \"2m\"\n")
	for _, args := range [][]string{
		{"run", "--policy", a, "--policy", b, "--", "true"},
		{"mcp", "--policy", a, "--policy", b},
		{"session", "create", "--policy", a, "--policy", b},
	} {
		code, _, errs := moat(t, ws, args...)
		if code == 0 || !strings.Contains(errs, "given twice ("+a+", then "+b+")") {
			t.Errorf("%v: code %d err %q, want the second --policy refused", args[:2], code, errs)
		}
	}
	if code, _, errs := moat(t, ws, "run", "--policy", a, "--", "true"); code != 0 {
		t.Errorf("control: one --policy: code %d err %q", code, errs)
	}
}

// TestSubcommandFlagErrors: a bad flag of a command other than run is one
// line in moat's words, naming the closest flag, with status 2 (it was
// package flag's text and the whole usage); --help prints the usage and
// exits 0.
func TestSubcommandFlagErrors(t *testing.T) {
	ws := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--socet", "x"}, "moat serve: unknown flag --socet (did you mean --socket?); see moat serve --help\n"},
		{[]string{"serve", "--drain", "abc"}, `moat serve: invalid value "abc" for --drain: want a duration such as "90s", "15m" or "2h"; see moat serve --help` + "\n"},
		{[]string{"approve", "--for", "999999999h", "x"}, `moat approve: invalid value "999999999h" for --for: too long (at most 2562047h47m16.854775807s); see moat approve --help` + "\n"},
		{[]string{"exec", "--bogus", "x", "--", "true"}, "moat exec: unknown flag --bogus; see moat exec --help\n"},
		{[]string{"session", "create", "--ttl"}, "moat session create: flag --ttl needs a value; see moat session create --help\n"},
	} {
		code, _, errs := moat(t, ws, tc.args...)
		if code != 2 || errs != tc.want {
			t.Errorf("%v: code %d err %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	if code, _, errs := moat(t, ws, "serve", "--help"); code != 0 || !strings.Contains(errs, "-socket") {
		t.Errorf("serve --help: code %d err %q", code, errs)
	}
	// A workspace mode too, named as the flag (the daemon named the
	// policy's workspace.mode, which the user never wrote).
	if code, _, errs := moat(t, ws, "session", "create", "--socket", filepath.Join(ws, "none.sock"), "--workspace-mode", "weird"); code != 2 || !strings.Contains(errs, `--workspace-mode: "weird" is not one of direct, readonly, overlay, copy`) {
		t.Errorf("session create --workspace-mode weird: %d %q", code, errs)
	}
	// No daemon at the socket: asked whether one runs; the socket of a
	// daemon that runs but is not this user's: told so (as root, a mode
	// 000 socket's parent keeps nobody out, so only the first is here).
	if code, _, errs := moat(t, ws, "session", "ls", "--socket", filepath.Join(ws, "none.sock")); code != exitMoatError || !strings.Contains(errs, "is moat serve running?") {
		t.Errorf("session ls without a daemon: %d %q", code, errs)
	}
	// A duration session create sends is checked before the daemon is
	// reached (none runs here), saying what is wrong with it.
	for v, want := range map[string]string{"abc": `--ttl: "abc" is not a duration such as "30m"`, "999999999h": "--ttl: invalid duration \"999999999h\": too long"} {
		code, _, errs := moat(t, ws, "session", "create", "--socket", filepath.Join(ws, "none.sock"), "--ttl", v)
		if code != 2 || !strings.Contains(errs, want) {
			t.Errorf("session create --ttl %s: code %d err %q, want 2 and %q", v, code, errs, want)
		}
	}
}

// TestRefusedRunRewritesReport: a run refused before it began (a bad flag
// value, a policy that does not load, no command) writes an error report
// over the one an earlier run left at --report, which a wrapper would
// otherwise read as this run's success. The control: the earlier run's
// report said exit 0.
func TestRefusedRunRewritesReport(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	report := filepath.Join(t.TempDir(), "r.json")
	bad := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(bad, []byte("[limits]\nmemroy = \"1G\"\n"), 0o644)
	read := func() (r struct {
		Reason   string `json:"reason"`
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
	}) {
		t.Helper()
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("report: %v\n%s", err, b)
		}
		return r
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--memory", "1", "--", "true"}, "--memory"},
		{[]string{"--policy", bad, "--", "true"}, "memroy"},
		{[]string{"--nosuchflag", "--", "true"}, "unknown flag"},
		{[]string{}, "no command given"},
	} {
		if code, _, errs := moat(t, ws, "run", "--report", report, "--", "true"); code != 0 || read().Reason != "exit" {
			t.Fatalf("control run: %d %s %+v", code, errs, read())
		}
		code, out, _ := moat(t, ws, append([]string{"run", "--json", "--report", report}, tc.args...)...)
		r := read()
		if code != exitMoatError || r.Reason != "error" || r.ExitCode != 125 || !strings.Contains(r.Error, tc.want) {
			t.Errorf("%v: code %d, report %+v, want an error naming %q", tc.args, code, r, tc.want)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var j struct{ Reason, Error string }
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &j); err != nil || j.Reason != "error" || !strings.Contains(j.Error, tc.want) {
			t.Errorf("%v: --json printed %q (%v)", tc.args, out, err)
		}
	}
}

// TestFirstOf: a line of refusals names the first maxListed and counts
// the rest (the control: a short list whole).
func TestFirstOf(t *testing.T) {
	if got := firstOf([]string{"a", "b"}, 3); got != "a; b" {
		t.Errorf("short list: %q", got)
	}
	if got := firstOf([]string{"a", "b", "c", "d"}, 2); got != "a; b; and 2 more (the report has them)" {
		t.Errorf("long list: %q", got)
	}
}

// TestInterruptDuringCopy: a SIGTERM while a copy-mode run still copies
// the workspace ends the run at once, reported killed before the command
// started, with no change set left (found by a tester: the copy went on
// to its end, and the signal then reached the command, reported as the
// command's own). The control: the same run left alone runs its command.
func TestInterruptDuringCopy(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state)
	ws := t.TempDir()
	for d := range 100 {
		dir := filepath.Join(ws, fmt.Sprintf("d%d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.WriteFile(filepath.Join(ws, ".moat.toml"), []byte("[workspace]\nmode = \"copy\"\n"), 0o644)
	if code, _, errs := moat(t, ws, "trust"); code != 0 {
		t.Fatalf("trust: %s", errs)
	}
	report := filepath.Join(t.TempDir(), "report.json")
	var out bytes.Buffer
	cmd := startAtPolicyLine(t, ws, &out, "run", "--report", report, "--", "sh", "-c", "echo ran")
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	took := time.Since(start)
	var rep struct {
		Reason       string  `json:"reason"`
		Error        string  `json:"error"`
		SetupSeconds float64 `json:"setup_seconds"`
	}
	b, err := os.ReadFile(report)
	if err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("no report: %v", err)
	}
	if rep.Reason != "killed" || !strings.Contains(rep.Error, "interrupted before the command started") || out.String() != "" {
		t.Errorf("report %s, output %q: want killed before the command started", b, out.String())
	}
	if took > 2*time.Second {
		t.Errorf("the run took %v to end after the signal: the copy went on", took)
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "runs")); len(ents) != 0 {
		t.Errorf("the interrupted copy left %d change sets", len(ents))
	}

	// The control, on a workspace quick to copy.
	for d := range 100 {
		os.RemoveAll(filepath.Join(ws, fmt.Sprintf("d%d", d)))
	}
	if code, stdout, errs := moat(t, ws, "run", "--", "sh", "-c", "echo ran"); code != 0 || stdout != "ran\n" {
		t.Errorf("control: %d %q %s", code, stdout, errs)
	}
}

// startAtPolicyLine starts moat with args in the workspace ws (stdout to
// stdout, nil for none) and returns once it has printed its policy line
// (the workspace's .moat.toml is trusted): a sign that its Go runtime
// has started and it runs its own code. The rest of its stderr is read
// and dropped.
func startAtPolicyLine(t *testing.T, ws string, stdout io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
	cmd.Dir = ws
	cmd.Stdout = stdout
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stderr)
	line, err := r.ReadString('\n')
	if err != nil || !strings.Contains(line, "using policy") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no policy line: %q %v", line, err)
	}
	go io.Copy(io.Discard, r)
	return cmd
}
