//go:build linux

// The CLI's tests run real sandboxes: Linux only (on macOS moat run says it
// is unsupported), and they use Linux's system calls.

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/sandbox/sandboxtest"
)

// TestMain lets this test binary be moat itself: the sandbox's init stage
// re-executes it, and tests that need a separate moat process start it
// with MOAT_TEST_AS_MOAT=1.
func TestMain(m *testing.M) {
	native.MaybeInit()
	gvisor.MaybeForward()
	if os.Getenv("MOAT_TEST_AS_MOAT") == "1" {
		if name := os.Getenv("MOAT_TEST_ENOSYS"); name != "" {
			sandboxtest.ExitOn(sandboxtest.WithoutSyscall(name, syscall.ENOSYS))
		}
		if os.Getenv("MOAT_TEST_NO_USERNS") == "1" {
			sandboxtest.ExitOn(sandboxtest.WithoutUserNamespaces())
		}
		exitAfterRun = true // as main does
		os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(sandboxtest.RunWithStateDir(m))
}

// startDir is the tests' working directory when the binary started.
var startDir, _ = os.Getwd()

func moat(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	// Back to where the tests started, not to the directory found on the
	// way in: when two calls overlap (a test approving, in one goroutine,
	// what another waits on), the one found may be the other's temporary
	// directory, removed once its test ends, and every later test would
	// run in a directory that is gone.
	defer os.Chdir(startDir)
	var out, errb bytes.Buffer
	code = realMain(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRunPrintsAndPassesExitCode(t *testing.T) {
	ws := t.TempDir()
	code, out, errs := moat(t, ws, "run", "--", "sh", "-c", "echo hi; exit 7")
	if code != 7 || out != "hi\n" {
		t.Fatalf("code %d out %q err %q", code, out, errs)
	}
}

func TestJSONReportIsLastLine(t *testing.T) {
	ws := t.TempDir()
	report := filepath.Join(t.TempDir(), "r.json")
	code, out, _ := moat(t, ws, "run", "--json", "--report", report, "--cpu-time", "1", "--", "sh", "-c", "echo out; while :; do :; done")
	if code != 128+int(syscall.SIGXCPU) {
		t.Errorf("code %d", code)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var rep map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("last line is not JSON: %q", lines[len(lines)-1])
	}
	for _, k := range []string{"exit_code", "signal", "reason", "limits_hit", "wall_seconds", "cpu_seconds", "max_memory_bytes", "policy", "degraded"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
	if rep["reason"] != "cpu" || rep["signal"] != "SIGXCPU" {
		t.Errorf("reason %v signal %v", rep["reason"], rep["signal"])
	}
	b, err := os.ReadFile(report)
	if err != nil || !json.Valid(b) {
		t.Errorf("--report file: %v", err)
	}
	if !strings.HasPrefix(out, "out\n{") {
		t.Errorf("the report does not follow the command's last line directly: %.40q", out)
	}
	// Output that ends without a newline gets one before the report;
	// a run that wrote nothing, or never started, prints the report alone.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--", "printf", "out"}, "out\n{"},
		// moat's own line on stderr after the run (the quarantine's)
		// leaves stdout's line open all the same.
		{[]string{"--", "sh", "-c", "printf out; echo x > .envrc"}, "out\n{"},
		{[]string{"--", "true"}, "{"},
		{[]string{"--net", "bogus", "--", "true"}, "{"},
	} {
		_, out, _ := moat(t, ws, append([]string{"run", "--json"}, tc.args...)...)
		if !strings.HasPrefix(out, tc.want) || strings.Count(out, "\n") != strings.Count(tc.want, "\n")+1 {
			t.Errorf("%v: stdout %.40q, want %q then the report's line", tc.args, out, tc.want)
		}
	}
	// Stdout and stderr one file (2>&1): the lines in the order written,
	// --json or not, then the report.
	script := `i=0; while [ $i -lt 50 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done`
	var both strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&both, "out%d\nerr%d\n", i, i)
	}
	for _, json := range []bool{false, true} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		go func() { b, _ := io.ReadAll(r); got <- string(b) }()
		args := []string{"run", "--", "sh", "-c", script}
		if json {
			args = []string{"run", "--json", "--", "sh", "-c", script}
		}
		if err := os.Chdir(ws); err != nil {
			t.Fatal(err)
		}
		realMain(args, strings.NewReader(""), w, w)
		os.Chdir(startDir)
		w.Close()
		if out := <-got; !strings.HasPrefix(out, both.String()) || json != strings.HasPrefix(out[len(both.String()):], "{") {
			t.Errorf("--json %v, 2>&1: not the lines in order, then the report: %.200q", json, out)
		}
	}
}

// A command that puts a link where --audit goes, in its workspace, does
// not lead the next run's records to the file the link names (a shell's
// start-up file, made by the write, would have run them): the next run is
// refused before its command starts. The control: the same run with the
// stream a regular file writes its records, and verify takes them.
func TestAuditFileNotFollowedOutOfTheWorkspace(t *testing.T) {
	ws := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	code, _, errs := moat(t, ws, "run", "--audit", "audit.jsonl", "--", "sh", "-c", "rm audit.jsonl && ln -s "+victim+" audit.jsonl")
	if code != 0 {
		t.Fatalf("code %d err %q", code, errs)
	}
	// The person is told the stream lies where the command can write.
	if !strings.Contains(errs, "WARNING: audit.jsonl, where this run's record is kept, lies in "+ws) {
		t.Errorf("no warning of a stream in the workspace: %q", errs)
	}
	code, _, errs = moat(t, ws, "run", "--audit", "audit.jsonl", "--", "touch", "ran")
	if _, err := os.Stat(filepath.Join(ws, "ran")); code != exitMoatError || err == nil || !strings.Contains(errs, "symbolic link") {
		t.Errorf("--audit at a link: code %d, ran: %v, err %q", code, err == nil, errs)
	}
	if b, err := os.ReadFile(victim); err == nil {
		t.Errorf("the run's records were written through the link: %q", b)
	}
	os.Remove(filepath.Join(ws, "audit.jsonl"))
	if code, _, errs := moat(t, ws, "run", "--audit", "audit.jsonl", "--", "touch", "ran"); code != 0 {
		t.Fatalf("the control: code %d err %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err != nil {
		t.Error("the control did not run")
	}
	if code, out, errs := moat(t, ws, "audit", "verify", "audit.jsonl"); code != 0 {
		t.Errorf("the control's stream: code %d out %q err %q", code, out, errs)
	}
	elsewhere := filepath.Join(t.TempDir(), "audit.jsonl")
	if code, _, errs := moat(t, ws, "run", "--audit", elsewhere, "--", "true"); code != 0 || strings.Contains(errs, "where this run's record is kept") {
		t.Errorf("a stream outside the workspace: code %d err %q", code, errs)
	}
}

// A command that puts a link where --report goes does not lead moat's
// write of the report to the file the link names; a report path that
// cannot be written refuses the run before the command starts.
func TestReportFileNotFollowedOutOfTheWorkspace(t *testing.T) {
	ws := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := moat(t, ws, "run", "--report", "report.json", "--", "sh", "-c", "ln -sf "+victim+" report.json")
	if code != 0 {
		t.Fatalf("code %d err %q", code, errs)
	}
	if b, _ := os.ReadFile(victim); string(b) != "original\n" {
		t.Errorf("the report was written through the command's link: %q", b)
	}
	code, _, errs = moat(t, ws, "run", "--report", filepath.Join(ws, "none", "r.json"), "--", "touch", "ran")
	if _, err := os.Stat(filepath.Join(ws, "ran")); code != exitMoatError || err == nil || !strings.Contains(errs, "--report") {
		t.Errorf("an unwritable --report: code %d, ran: %v, err %q", code, err == nil, errs)
	}
	// The link the first run left is refused, not followed, by the next.
	code, _, errs = moat(t, ws, "run", "--report", "report.json", "--", "touch", "ran")
	if _, err := os.Stat(filepath.Join(ws, "ran")); code != exitMoatError || err == nil || !strings.Contains(errs, "symbolic link") {
		t.Errorf("--report at a link: code %d, ran: %v, err %q", code, err == nil, errs)
	}
	if b, _ := os.ReadFile(victim); string(b) != "original\n" {
		t.Errorf("the next run's report was written through the link: %q", b)
	}
	// A fifo the command made there is refused too, rather than holding
	// the next run's open until something reads it.
	if code, _, errs := moat(t, ws, "run", "--", "mkfifo", "fifo.json"); code != 0 {
		t.Fatalf("mkfifo: code %d err %q", code, errs)
	}
	os.Remove(filepath.Join(ws, "ran"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		code, _, errs = moat(t, ws, "run", "--report", "fifo.json", "--", "touch", "ran")
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		f, _ := os.OpenFile(filepath.Join(ws, "fifo.json"), os.O_RDONLY, 0)
		<-done
		f.Close()
		t.Fatal("--report at a fifo held the run")
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); code != exitMoatError || err == nil || !strings.Contains(errs, "not a regular file") {
		t.Errorf("--report at a fifo: code %d, ran: %v, err %q", code, err == nil, errs)
	}
	report := filepath.Join(ws, "r.json")
	os.WriteFile(report, bytes.Repeat([]byte("x"), 1<<16), 0o644)
	if code, _, errs := moat(t, ws, "run", "--report", report, "--", "true"); code != 0 {
		t.Fatalf("code %d err %q", code, errs)
	}
	if b, _ := os.ReadFile(report); !json.Valid(b) {
		t.Errorf("a longer old report is not replaced whole: %d bytes", len(b))
	}
}

func TestMalformedPolicies(t *testing.T) {
	cases := []struct {
		name, toml string
		want       []string
	}{
		{"syntax", "[limits]\nwall = \n", []string{"p.toml:2"}},
		{"unknown key", "[limits]\nwall = \"1m\"\nmemroy = \"1G\"\n", []string{"p.toml:3", "limits.memroy", "unknown"}},
		{"negative", "[limits]\npids = -5\n", []string{"p.toml:2", "limits.pids"}},
		{"relative path", "[filesystem]\nread_only = [\"/usr\", \"etc\"]\n", []string{"p.toml:2", "filesystem.read_only[1]"}},
		{"two problems", "[workspace]\nmode = \"snapshot\"\n[user]\nuid = 0\n", []string{"p.toml:2: workspace.mode", "p.toml:4: user.uid"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "p.toml"), []byte(c.toml), 0o644)
			code, out, errs := moat(t, dir, "run", "--policy", "p.toml", "--", "echo", "RAN")
			if code != exitMoatError || strings.Contains(out, "RAN") {
				t.Fatalf("code %d out %q: want 125 and no run", code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("error %q lacks %q", errs, w)
				}
			}
		})
	}
}

// moat mcp locates a policy's problems in the file, not in "policy" (the
// name the daemon gives the document it is sent).
func TestMCPPolicyErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.toml"), []byte("[limits]\npids = -5\n"), 0o644)
	code, _, errs := moat(t, dir, "mcp", "--policy", "p.toml")
	if code != exitMoatError || !strings.Contains(errs, "p.toml:2: limits.pids") {
		t.Errorf("code %d err %q", code, errs)
	}
}

func TestBadFlags(t *testing.T) {
	ws := t.TempDir()
	for _, args := range [][]string{
		{"run", "--memory", "12 parsecs", "--", "true"},
		{"run", "--wall", "soon", "--", "true"},
		{"run", "--pids", "many", "--", "true"},
		{"run", "--memory", "--", "true"},
		{"run", "--no-such-flag", "--", "true"},
		{"run", "--workspace-mode", "snapshot", "--", "true"},
		{"run", "--tcp-bind", "http", "--", "true"},
		{"run", "--tcp-connect", "443,", "--", "true"},
		{"run", "--isolation", "vm", "--", "true"},
	} {
		code, _, errs := moat(t, ws, args...)
		if code != exitMoatError || errs == "" {
			t.Errorf("%v: code %d err %q", args, code, errs)
		}
		if args[2] == "--" && args[1] == "--memory" && !strings.Contains(errs, "needs a value") {
			t.Errorf("%v: the value left out is not named: %q", args, errs)
		} else if strings.Contains(args[1], "memory") && args[2] != "--" && !strings.Contains(errs, "512M") {
			t.Errorf("%v: error does not say what is allowed: %q", args, errs)
		}
		if strings.HasPrefix(args[1], "--tcp") && !strings.Contains(errs, "ports separated by commas (22,8080) or none") {
			t.Errorf("%v: error does not say what is allowed: %q", args, errs)
		}
	}
	if code, _, errs := moat(t, ws, "frobnicate"); code != 2 || !strings.Contains(errs, "run, diff, apply") {
		t.Errorf("unknown command: %d %q", code, errs)
	}
}

// A command that takes a file or a URL prints its usage for --help
// (status 0, as a command with flags does) instead of trusting, reading or
// fetching a file named "--help", and refuses an unknown flag as one
// (status 2) rather than take it for a file; "--" passes a file whose name
// starts with "-".
func TestHelpOfCommandsWithoutFlags(t *testing.T) {
	ws := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		err  string // the start of stderr
	}{
		{[]string{"trust", "--help"}, 0, "usage: moat trust"},
		{[]string{"policy", "suggest", "--help"}, 0, "usage: moat policy suggest"},
		{[]string{"policy", "check", "-h"}, 0, "usage: moat policy check"},
		{[]string{"audit", "verify", "-h"}, 0, "usage: moat audit verify"},
		{[]string{"audit", "--help"}, 0, "usage: moat audit verify"},
		{[]string{"fetch", "--help"}, 0, "usage: moat fetch"},
		{[]string{"doctor", "--help"}, 0, "usage: moat doctor"},
		{[]string{"version", "--help"}, 0, "usage: moat version"},
		{[]string{"session", "--help"}, 0, "usage: moat session"},
		{[]string{"trust", "--yes", ".moat.toml"}, 2, "moat trust: unknown flag --yes"},
		{[]string{"doctor", "--json"}, 2, "moat doctor: unknown flag --json"},
		{[]string{"fetch", "-k", "https://example.com/"}, 2, "moat fetch: unknown flag -k"},
		{[]string{"audit", "verify", "--quiet", "a.jsonl"}, 2, "moat audit verify: unknown flag --quiet"},
		{[]string{"policy", "check", "a.toml", "--strict"}, 2, "moat policy check: unknown flag --strict"},
		{[]string{"policy", "suggest", "--learn", "a.jsonl"}, 2, "moat policy suggest: unknown flag --learn"},
		{[]string{"version", "--short"}, 2, "moat version: unknown flag --short"},
		{[]string{"doctor", "extra"}, 2, "usage: moat doctor"},
		{[]string{"audit", "check", "a.jsonl"}, 2, "usage: moat audit verify"},
		{[]string{"session"}, 2, "usage: moat session"},
		// No SESSION before the command ($S empty): "sh" is not one.
		{[]string{"exec", "--", "sh", "-c", "true"}, 2, "usage: moat exec"},
		{[]string{"exec", "-t", "--", "sh"}, 2, "usage: moat exec"},
	} {
		code, out, errs := moat(t, ws, c.args...)
		if code != c.code || out != "" || !strings.HasPrefix(errs, c.err) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: code %d out %q err %q, want %d and %q", c.args, code, out, errs, c.code, c.err)
		}
	}
	// moat fetch has no policy: a refusal that speaks of allow_cidrs says
	// it does not apply here (it told the user to add a range, found by a
	// tester); one that does not is left alone (the control).
	if code, _, errs := moat(t, ws, "fetch", "https://localhost:8443/"); code != 1 || !strings.Contains(errs, "allow_cidrs does not list") || !strings.Contains(errs, "moat fetch takes no policy") {
		t.Errorf("fetch https://localhost: code %d err %q", code, errs)
	}
	if code, _, errs := moat(t, ws, "fetch", "http://example.com/"); code != 1 || strings.Contains(errs, "takes no policy") {
		t.Errorf("fetch http://: code %d err %q", code, errs)
	}
	// The control: after "--", "-x.toml" is a file, looked for and missing.
	if code, _, errs := moat(t, ws, "policy", "check", "--", "-x.toml"); code == 2 || !strings.Contains(errs, "-x.toml") || strings.Contains(errs, "unknown flag") {
		t.Errorf("policy check -- -x.toml: code %d err %q", code, errs)
	}
}

func TestFlagErrorNamesFlag(t *testing.T) {
	ws := t.TempDir()
	code, _, errs := moat(t, ws, "run", "--pids", "-3", "--", "true")
	if code != exitMoatError || !strings.Contains(errs, "--pids") || !strings.Contains(errs, "limits.pids") {
		t.Errorf("code %d err %q", code, errs)
	}
	code, _, errs = moat(t, ws, "run", "--tcp-bind", "80,99999", "--", "true")
	if code != exitMoatError || !strings.Contains(errs, "--tcp-bind") || !strings.Contains(errs, "network.tcp_bind[1]: 99999 is not a TCP port") {
		t.Errorf("code %d err %q", code, errs)
	}
}

func TestWorkspacePolicyPickedUp(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	pol := filepath.Join(ws, ".moat.toml")
	os.WriteFile(pol, []byte("[env]\nset = { GREETING = \"from-policy\" }\n"), 0o644)

	// Not trusted yet: refused, nothing runs.
	code, out, errs := moat(t, ws, "run", "--", "echo", "RAN")
	if code != exitMoatError || strings.Contains(out, "RAN") || !strings.Contains(errs, "moat trust") {
		t.Fatalf("untrusted policy: code %d out %q err %q", code, out, errs)
	}
	if code, _, errs := moat(t, ws, "trust"); code != 0 {
		t.Fatalf("trust: %s", errs)
	}
	code, out, errs = moat(t, ws, "run", "--", "sh", "-c", "echo $GREETING; echo x >> .moat.toml")
	if code == 0 || !strings.Contains(out, "from-policy") || !strings.Contains(errs, ".moat.toml") {
		t.Fatalf("code %d out %q err %q (want the policy used, named, and itself read-only inside)", code, out, errs)
	}
}

func TestRefusesHomeAsWorkspace(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil || home == "/" {
		t.Skip("no home directory")
	}
	code, _, errs := moat(t, home, "run", "--", "true")
	if code != exitMoatError || !strings.Contains(errs, "home directory") {
		t.Errorf("code %d err %q", code, errs)
	}
}

func TestDoctor(t *testing.T) {
	code, out, errs := moat(t, t.TempDir(), "doctor")
	if code != 0 {
		t.Fatalf("doctor exit %d\n%s%s", code, out, errs)
	}
	for _, w := range []string{"user namespaces", "landlock", "cgroups", "memory limits", "default policy", "overlay workspace", "disk limit", "gvisor isolation"} {
		if !strings.Contains(out, w) {
			t.Errorf("doctor output lacks %q:\n%s", w, out)
		}
	}
	// The Landlock line tells what this kernel has; without Landlock the
	// default policy still runs (doctor exits 0 above), with the mounts
	// alone checking file access.
	want := regexp.MustCompile(`(?m)^ok +landlock +ABI [0-9]+: `)
	if sandbox.ProbeHost().LandlockABI == 0 {
		want = regexp.MustCompile(`(?m)^absent +landlock +not available on this kernel`)
	}
	if !want.MatchString(out) {
		t.Errorf("doctor's landlock line does not match %s (kernel ABI %d):\n%s", want, sandbox.ProbeHost().LandlockABI, out)
	}
	// Where runsc runs sandboxes (root, runsc found), doctor says so: its
	// probe is not refused for the rules gVisor cannot check.
	if _, err := gvisor.Find(""); err == nil && os.Geteuid() == 0 && os.Getenv("MOAT_VMTEST_GUEST") == "" {
		if want := regexp.MustCompile(`(?m)^ok +gvisor isolation +--isolation gvisor: runsc `); !want.MatchString(out) {
			t.Errorf("doctor's gvisor line does not match %s:\n%s", want, out)
		}
		// A program that exits 0 but is no runsc is not gVisor (before, it
		// passed, tried).
		fake := filepath.Join(t.TempDir(), "runsc")
		os.WriteFile(fake, []byte("#!/bin/sh\nexit 0\n"), 0o755)
		t.Setenv("MOAT_RUNSC", fake)
		if _, out, _ := moat(t, t.TempDir(), "doctor"); !regexp.MustCompile(`(?m)^no +gvisor isolation .*is it (gVisor.s )?runsc\?`).MatchString(out) {
			t.Errorf("doctor with a runsc that runs nothing:\n%s", out)
		}
		// A run under it fails (125, saying so) rather than reporting the
		// command's success: it exited 0, and no command ran (tried).
		pol := filepath.Join(t.TempDir(), "p.toml")
		os.WriteFile(pol, []byte("[harness]\nbuiltin = []\n"), 0o644)
		if code, _, errOut := moat(t, t.TempDir(), "run", "--isolation", "gvisor", "--policy", pol, "--read-only", "--", "true"); code != 125 || !strings.Contains(errOut, "without starting the sandbox") {
			t.Errorf("a run under a runsc that runs nothing: exit %d, %s", code, errOut)
		}
	}
	// The process limit holds for every caller, and doctor says by what.
	if native.NprocPerUserns() {
		if want := regexp.MustCompile(`(?m)^ok +  pids limits +(available to this caller \(cgroup\)|by RLIMIT_NPROC)`); !want.MatchString(out) {
			t.Errorf("doctor's pids line does not match %s:\n%s", want, out)
		}
	}
}

// TestDoctorIDMap: as root, doctor says whether a workspace in the current
// directory would be refused for want of idmapped mounts, as a run would
// be; and with TMPDIR on a filesystem root cannot id-map (tmpfs before
// Linux 6.3), it says that the default-policy probe fails for that reason
// alone.
func TestDoctorIDMap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root id-maps workspaces")
	}
	dir := t.TempDir()
	tmpfs := t.TempDir()
	if err := syscall.Mount("moattest", tmpfs, "tmpfs", 0, "mode=1777"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	defer syscall.Unmount(tmpfs, syscall.MNT_DETACH)
	p := policy.Default()
	for _, c := range []struct{ cwd, tmp string }{{dir, dir}, {tmpfs, tmpfs}} {
		t.Setenv("TMPDIR", c.tmp)
		code, out, errs := moat(t, c.cwd, "doctor")
		mappable := native.CheckIDMap(c.cwd, p.User.HostUID, p.User.HostGID) == nil
		line := regexp.MustCompile(`(?m)^(ok|no) +idmapped workspace +(.*)$`).FindStringSubmatch(out)
		switch {
		case line == nil:
			t.Errorf("%s: no idmapped workspace line:\n%s", c.cwd, out)
		case mappable && line[1] != "ok", !mappable && (line[1] != "no" || !strings.Contains(line[2], "cannot id-map")):
			t.Errorf("%s (mappable %v): %q", c.cwd, mappable, line[0])
		}
		explained := strings.Contains(out, "temporary directory") && strings.Contains(out, "fails for this reason alone")
		if mappable {
			if explained || code != 0 {
				t.Errorf("TMPDIR %s can be id-mapped: exit %d\n%s%s", c.tmp, code, out, errs)
			}
		} else if !explained || code == 0 || !strings.Contains(out, "FAIL     default policy") {
			t.Errorf("TMPDIR %s cannot be id-mapped: want the probe's failure, explained; exit %d\n%s%s", c.tmp, code, out, errs)
		}
	}
}

// hooked runs this test binary as moat in dir, with a test hook from
// TestMain in its environment (MOAT_TEST_ENOSYS=..., MOAT_TEST_NO_USERNS=1),
// and returns its exit code and combined output.
func hooked(t *testing.T, dir, hook string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1", hook)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// TestRunsWithoutClone3: where clone3 is refused (a container's seccomp
// profile answers ENOSYS), the direct start falls back to clone and
// resets the signal handlers itself (CLONE_CLEAR_SIGHAND needs clone3).
// The run works as usual: output, a seccomp denial seen by the host's
// supervisor, and the command's death by a signal.
func TestRunsWithoutClone3(t *testing.T) {
	code, out := hooked(t, t.TempDir(), "MOAT_TEST_ENOSYS=clone3", "run", "--json", "--", "sh", "-c", `echo hi; unshare -U true 2>/dev/null; kill -TERM $$; sleep 5`)
	if code != 128+int(syscall.SIGTERM) || !strings.HasPrefix(out, "hi\n") || !strings.Contains(out, `"what":"unshare"`) {
		t.Errorf("without clone3: exit %d, want %d, output and the unshare denial:\n%s", code, 128+int(syscall.SIGTERM), out)
	}
}

// TestNetworkNamespaceFailureNamed: when the network namespace cannot be
// made (here unshare answers ENOSYS), the run stops before the command
// with the stage and the kernel's answer, not a stand-in errno.
func TestNetworkNamespaceFailureNamed(t *testing.T) {
	ws := t.TempDir()
	code, out := hooked(t, ws, "MOAT_TEST_ENOSYS=unshare", "run", "--", "sh", "-c", "echo RAN > ran")
	if code != exitMoatError || !strings.Contains(out, "network namespace: function not implemented") {
		t.Errorf("exit %d, want %d and the stage with ENOSYS:\n%s", code, exitMoatError, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("the command ran")
	}
}

// TestRefusesWithoutNeededSyscalls: on a kernel without a system call
// every sandbox needs (simulated by a seccomp filter answering ENOSYS, as
// an old kernel or a container's profile would), moat refuses up front,
// naming the call and the kernel it needs, instead of failing half-way
// through init with a bare errno; doctor says the same and exits 1.
func TestRefusesWithoutNeededSyscalls(t *testing.T) {
	ws := t.TempDir()
	for name, want := range map[string]string{"mount_setattr": "mount_setattr (Linux 5.12)", "close_range": "close_range with CLOSE_RANGE_CLOEXEC (Linux 5.11)"} {
		run := func(args ...string) (int, string) {
			return hooked(t, ws, "MOAT_TEST_ENOSYS="+name, args...)
		}
		code, out := run("run", "--", "sh", "-c", "echo RAN > ran")
		if code != exitMoatError || !strings.Contains(out, want) || !strings.Contains(out, "Linux 5.12 or later") {
			t.Errorf("%s refused: exit %d, want %d and a message naming %q:\n%s", name, code, exitMoatError, want, out)
		}
		if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
			t.Errorf("%s refused: the command ran", name)
		}
		code, out = run("doctor")
		if code != 1 || !regexp.MustCompile(`(?m)^MISSING +system calls +.*`+regexp.QuoteMeta(want)).MatchString(out) {
			t.Errorf("%s refused: doctor exit %d, want 1 and a MISSING line naming %q:\n%s", name, code, want, out)
		}
	}
	code, out, _ := moat(t, ws, "doctor")
	if code != 0 || !regexp.MustCompile(`(?m)^ok +system calls`).MatchString(out) {
		t.Errorf("doctor on this kernel: exit %d\n%s", code, out)
	}
}

// TestRefusesWithoutUserNamespaces: where the kernel refuses new user
// namespaces (simulated by a seccomp filter answering clone with
// CLONE_NEWUSER with EPERM, as a sysctl or Ubuntu's AppArmor restriction
// would), the run fails as moat's own error and says that, and where to
// look, not only "fork/exec: operation not permitted".
func TestRefusesWithoutUserNamespaces(t *testing.T) {
	ws := t.TempDir()
	code, out := hooked(t, ws, "MOAT_TEST_NO_USERNS=1", "run", "--", "sh", "-c", "echo RAN > ran")
	if code != exitMoatError {
		t.Errorf("exit %d, want %d:\n%s", code, exitMoatError, out)
	}
	for _, want := range []string{"refused to create the sandbox's user namespace", "moat doctor", "operation not permitted"} {
		if !strings.Contains(out, want) {
			t.Errorf("the message lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("the command ran")
	}
}

// startReady starts this test binary as `moat run -- sh -c script` in dir
// and returns once the script has printed its "ready" line, with the rest
// of its stdout.
// TestInitEndsWithMoat: the CLI leaves the direct start's init, idle
// after its report, to end with moat's own exit (see
// sandbox.Request.ExitAfter); it must then end. Init shares moat's
// memory, and with it moat's command line, which carries the marker.
func TestInitEndsWithMoat(t *testing.T) {
	marker := fmt.Sprintf("linger-%d", time.Now().UnixNano())
	for i := 0; i < 3; i++ {
		if code, out := hooked(t, t.TempDir(), "MOAT_TEST_LINGER=1", "run", "--", "/bin/true", marker); code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
	}
	pids := sandboxtest.Gone(func() []int { return sandboxtest.Find(marker) }, 3*time.Second)
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	if len(pids) > 0 {
		t.Fatalf("processes of the runs alive 3 s after moat exited: %v", pids)
	}
}

func startReady(t *testing.T, dir, script string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "run", "--", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "ready\n" {
		cmd.Process.Kill()
		t.Fatalf("%q: no ready line: %q %v", script, buf, err)
	}
	return cmd, out
}

// TestCtrlZStopsTheCommand: SIGTSTP to moat (Ctrl-Z) in a run that has
// lasted stops the command and then moat; SIGCONT (the shell's fg)
// resumes both, and the run ends as usual.
func TestCtrlZStopsTheCommand(t *testing.T) {
	ws := t.TempDir()
	marker := fmt.Sprintf("3000.%d", time.Now().UnixNano()%1000000)
	cmd, out := startReady(t, ws, "sl''eep "+marker+" & echo ready; wait; echo resumed")
	defer cmd.Process.Kill()
	sleeper := sandboxtest.Find("sleep " + marker)
	for deadline := time.Now().Add(5 * time.Second); len(sleeper) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		sleeper = sandboxtest.Find("sleep " + marker)
	}
	if len(sleeper) != 1 {
		t.Fatalf("the command's sleep: %v", sleeper)
	}
	time.Sleep(200 * time.Millisecond) // moat's handlers come after 50 ms
	state := func(pid int) byte {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return '?'
		}
		return b[i+2]
	}
	waitState := func(pid int, want byte) bool {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if state(pid) == want {
				return true
			}
		}
		return false
	}
	cmd.Process.Signal(syscall.SIGTSTP)
	if !waitState(cmd.Process.Pid, 'T') {
		t.Fatalf("moat did not stop: state %c", state(cmd.Process.Pid))
	}
	if !waitState(sleeper[0], 'T') {
		t.Errorf("the command did not stop with moat: state %c", state(sleeper[0]))
	}
	cmd.Process.Signal(syscall.SIGCONT)
	if !waitState(sleeper[0], 'S') {
		t.Errorf("the command did not resume: state %c", state(sleeper[0]))
	}
	syscall.Kill(sleeper[0], syscall.SIGTERM) // end the sleep; the shell goes on
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil || !strings.Contains(string(rest), "resumed") {
		t.Errorf("after fg: %v, output %q", err, rest)
	}
}

// TestKilledMoatLeavesNoSurvivors SIGKILLs the moat process itself in the
// middle of a run: the sandbox must die with it.
func TestKilledMoatLeavesNoSurvivors(t *testing.T) {
	ws := t.TempDir()
	marker := fmt.Sprintf("2000.%d", time.Now().UnixNano()%1000000)
	// The quotes in sl''eep keep "sleep MARKER" out of the command lines
	// of moat, init and sh: only the two sleeps match it. (A program name
	// in a variable would do too, but the rules ask about a program whose
	// name is only known when the line runs.)
	cmd := exec.Command(os.Args[0], "run", "--", "sh", "-c", "setsid sl''eep "+marker+" & sl''eep "+marker)
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
	cmd.Dir = ws
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Both sleeps must be seen on two polls in a row: a process in the
	// middle of execve (setsid becoming sleep) shows an empty command
	// line for a moment, as the guest under emulation once caught.
	deadline := time.Now().Add(5 * time.Second)
	seen := 0
	for seen < 2 && time.Now().Before(deadline) {
		if len(sandboxtest.Find("sleep "+marker)) >= 2 {
			seen++
		} else {
			seen = 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	if seen < 2 {
		cmd.Process.Kill()
		t.Fatalf("sandboxed sleeps did not start (%d seen)", len(sandboxtest.Find("sleep "+marker)))
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline = time.Now().Add(2 * time.Second)
	for len(sandboxtest.Find("sleep "+marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := sandboxtest.Find("sleep " + marker); len(left) > 0 {
		for _, p := range left {
			syscall.Kill(p, syscall.SIGKILL)
		}
		t.Fatalf("processes survived moat's death: %v", left)
	}
}

// TestSignalsAreForwarded: a SIGTERM to moat reaches the command, which
// can clean up and choose its exit status; so does Ctrl-\. moat installs
// its handlers once a run has lasted 50 ms (see cmdRun): the test waits
// past that.
func TestSignalsAreForwarded(t *testing.T) {
	ws := t.TempDir()
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 3}, {syscall.SIGQUIT, 4}} {
		name := unix.SignalName(c.sig)[3:]
		script := fmt.Sprintf("trap 'echo got-%s; exit %d' %s; echo ready; sleep 10 & wait", name, c.code, name)
		cmd, out := startReady(t, ws, script)
		time.Sleep(200 * time.Millisecond) // the handlers come after 50 ms
		cmd.Process.Signal(c.sig)
		rest, _ := io.ReadAll(out)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != c.code || !strings.Contains(string(rest), "got-"+name) {
			t.Errorf("%s: exit %v, output %q: want the command's trap to run and exit %d", name, err, rest, c.code)
		}
	}
}

// TestAuditStream: --audit appends one JSON line per network decision,
// per refused system call, and one for the run, each with its type.
func TestAuditStream(t *testing.T) {
	ws := t.TempDir()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	earlier, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	earlier.Write(map[string]any{"type": "run", "earlier": true})
	earlier.Close()
	code, _, errs := moat(t, ws, "run", "--net", "allow:example.com", "--audit", path, "--",
		"sh", "-c", "curl -s -m 5 http://denied.test/ >/dev/null; unshare -r true 2>/dev/null; echo x > .envrc; exit 3")
	if code != 3 {
		t.Fatalf("code %d: %s", code, errs)
	}
	b, _ := os.ReadFile(path)
	types := map[string]int{}
	var last map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		types[rec["type"].(string)]++
		last = rec
	}
	if types["run"] != 2 || types["network"] < 1 || types["denial"] < 1 {
		t.Errorf("record types %v, want the earlier run, a network decision, a denial and this run", types)
	}
	if got := fmt.Sprint(last["protected_created"]); got != "[.envrc]" {
		t.Errorf("the run record's protected_created is %s, want [.envrc]", got)
	}
}

// TestNetworkFailureNamed: an allowed destination that cannot be reached
// is named with why on moat's network line, alone or beside a refusal
// (curl shows only a tunnel's 502, never the body that says why). The
// control: the refusal is named as it always was.
func TestNetworkFailureNamed(t *testing.T) {
	ws := t.TempDir()
	const fail = "curl -s -m 30 https://nothing.invalid/ >/dev/null" // curl: 56, the tunnel's 502
	const want = "moat: network: could not reach nothing.invalid:443 (resolve nothing.invalid"
	code, _, errs := moat(t, ws, "run", "--net", "allow:nothing.invalid", "--", "sh", "-c", fail)
	if code != 56 || !strings.Contains(errs, want) || !strings.Contains(errs, "0 allowed, 1 failed") {
		t.Errorf("the failure alone: code %d, stderr %q", code, errs)
	}
	code, _, errs = moat(t, ws, "run", "--net", "allow:nothing.invalid", "--",
		"sh", "-c", fail+"; curl -s -m 10 http://denied.test/ >/dev/null; exit 0")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errs)
	}
	if !strings.Contains(errs, "refused denied.test:80 (default deny)") {
		t.Fatalf("control: the refusal is not named: %q", errs)
	}
	if !strings.Contains(errs, "could not reach nothing.invalid:443 (resolve nothing.invalid") || !strings.Contains(errs, "1 failed") {
		t.Errorf("the failure beside a refusal is not named with why: %q", errs)
	}
}

// TestChangedPolicyNeedsTrustAgain: a .moat.toml that changed after it was
// trusted (say, rewritten by a command in direct mode) is refused.
func TestChangedPolicyNeedsTrustAgain(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	pol := filepath.Join(ws, ".moat.toml")
	os.WriteFile(pol, []byte("[limits]\nwall = \"1m\"\n"), 0o644)
	if code, _, errs := moat(t, ws, "trust"); code != 0 {
		t.Fatalf("trust: %s", errs)
	}
	if code, _, errs := moat(t, ws, "run", "--", "true"); code != 0 {
		t.Fatalf("trusted policy refused: %s", errs)
	}
	os.WriteFile(pol, []byte("[network]\nmode = \"host\"\n"), 0o644)
	code, out, errs := moat(t, ws, "run", "--", "echo", "RAN")
	if code != exitMoatError || strings.Contains(out, "RAN") || !strings.Contains(errs, "changed since you trusted it") {
		t.Fatalf("changed policy: code %d out %q err %q", code, out, errs)
	}
	// An explicit --policy is the person's own choice.
	if code, _, errs := moat(t, ws, "run", "--policy", pol, "--", "true"); code != 0 {
		t.Fatalf("--policy: %s", errs)
	}
}

// TestTrustCoversLoadedProfile is the attack of a trusted .moat.toml that
// names a seccomp profile inside the workspace: the command rewrites the
// profile into a weaker one, and the next run must be refused rather than
// run under it.
func TestTrustCoversLoadedProfile(t *testing.T) {
	if sandbox.SeccompNativeArch() == "" {
		t.Skip("no seccomp filters for this architecture")
	}
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	prof := filepath.Join(ws, "profile.json")
	os.WriteFile(prof, []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}`), 0o644)
	os.WriteFile(filepath.Join(ws, ".moat.toml"), []byte("[syscalls]\nprofile = \"missing.json\"\n"), 0o644)
	// A profile that is not there is named with the line that loads it.
	if code, _, errs := moat(t, ws, "trust"); code == 0 || !strings.Contains(errs, ".moat.toml:2: syscalls.profile: open "+filepath.Join(ws, "missing.json")) {
		t.Errorf("trust of a missing profile: code %d err %q (want the line and field)", code, errs)
	}
	os.WriteFile(filepath.Join(ws, ".moat.toml"), []byte("[syscalls]\nprofile = \"profile.json\"\n"), 0o644)
	code, out, errs := moat(t, ws, "trust")
	if code != 0 || !strings.Contains(out, prof) {
		t.Fatalf("trust: code %d out %q err %q (want the profile named)", code, out, errs)
	}

	// The trusted profile is in force, and read-only inside, as the
	// policy is. Anything else that writes the workspace (a session, a
	// run under another policy) can weaken it; the trust stops that.
	weaker := `{"defaultAction": "SCMP_ACT_ALLOW"}`
	code, out, errs = moat(t, ws, "run", "--", "sh", "-c", "mkdir d 2>/dev/null || echo REFUSED; printf '%s' '"+weaker+"' > profile.json 2>/dev/null || echo READ-ONLY")
	if code != 0 || !strings.Contains(out, "REFUSED") || !strings.Contains(out, "READ-ONLY") {
		t.Fatalf("first run: code %d out %q err %q (want mkdir refused by the trusted profile, and the profile read-only)", code, out, errs)
	}
	if err := os.WriteFile(prof, []byte(weaker), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errs = moat(t, ws, "run", "--", "sh", "-c", "mkdir d && echo MADE")
	if code != exitMoatError || strings.Contains(out, "MADE") || !strings.Contains(errs, prof) || !strings.Contains(errs, "moat trust") {
		t.Fatalf("run after the profile changed: code %d out %q err %q (want a refusal naming %s and moat trust)", code, out, errs, prof)
	}

	// Trusted again, the profile as it now is runs.
	if code, _, errs := moat(t, ws, "trust"); code != 0 {
		t.Fatalf("trust again: %s", errs)
	}
	if code, out, errs := moat(t, ws, "run", "--", "sh", "-c", "mkdir d && echo MADE"); code != 0 || !strings.Contains(out, "MADE") {
		t.Fatalf("re-trusted: code %d out %q err %q", code, out, errs)
	}
}

// TestTrustRecordWithoutFiles: a record written before moat hashed the
// files a policy loads still trusts a policy that loads none, and is
// refused, with the way out, for one that names a profile.
func TestTrustRecordWithoutFiles(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state)
	ws := t.TempDir()
	pol := filepath.Join(ws, ".moat.toml")
	sum := func() string { b, _ := os.ReadFile(pol); return fmt.Sprintf("%x", sha256.Sum256(b)) }
	oldRecord := func() {
		b, _ := json.Marshal(map[string]string{pol: sum()})
		os.WriteFile(filepath.Join(state, "trusted-policies.json"), b, 0o600)
	}

	os.WriteFile(pol, []byte("[limits]\nwall = \"1m\"\n"), 0o644)
	oldRecord()
	if code, _, errs := moat(t, ws, "run", "--", "true"); code != 0 {
		t.Fatalf("old record, no file loaded: %s", errs)
	}

	os.WriteFile(filepath.Join(ws, "p.json"), []byte(`{"defaultAction": "SCMP_ACT_ALLOW"}`), 0o644)
	os.WriteFile(pol, []byte("[syscalls]\nprofile = \"p.json\"\n"), 0o644)
	oldRecord()
	code, out, errs := moat(t, ws, "run", "--", "echo", "RAN")
	if code != exitMoatError || strings.Contains(out, "RAN") || !strings.Contains(errs, "p.json") || !strings.Contains(errs, "moat trust") {
		t.Fatalf("old record, profile loaded: code %d out %q err %q", code, out, errs)
	}
	if code, _, errs := moat(t, ws, "trust"); code != 0 {
		t.Fatalf("trust: %s", errs)
	}
	if code, out, errs := moat(t, ws, "run", "--", "echo", "RAN"); code != 0 || out != "RAN\n" {
		t.Fatalf("re-trusted: code %d out %q err %q", code, out, errs)
	}
}

// TestGrowStackKeepsItsFrame: growStack works only while the compiler keeps
// its 32 KiB frame (its first version lost it to dead-code elimination and
// did nothing). On a fresh goroutine, whose stack starts at a few KiB, the
// call must move the stack: a local's address differs after it.
func TestGrowStackKeepsItsFrame(t *testing.T) {
	moved := make(chan bool)
	go func() {
		var x byte
		before := uintptr(unsafe.Pointer(&x))
		growStack()
		moved <- uintptr(unsafe.Pointer(&x)) != before
	}()
	if !<-moved {
		t.Error("growStack did not grow a fresh goroutine's stack: its frame is gone")
	}
}

// TestPolicyShowRefusesWhatRunRefuses: one grammar of destinations, so
// policy show accepts exactly what a run does.
func TestPolicyShowRefusesWhatRunRefuses(t *testing.T) {
	ws := t.TempDir()
	for _, net := range []string{"allow:*.com", "allow:*.co.uk", "allow:10.0.0.1", "allow:*"} {
		for _, cmd := range [][]string{{"policy", "show"}, {"run"}} {
			args := append(append([]string{}, cmd...), "--net", net)
			if cmd[0] == "run" {
				args = append(args, "--", "echo", "RAN")
			}
			code, out, errs := moat(t, ws, args...)
			if code != exitMoatError || strings.Contains(out, "RAN") || !strings.Contains(errs, "network.allow[0]") {
				t.Errorf("%v: code %d out %q err %q, want refused with the entry named", args, code, out, errs)
			}
		}
	}
	if code, out, errs := moat(t, ws, "policy", "show", "--net", "allow:db,pypi.org"); code != 0 || !strings.Contains(out, `'db'`) {
		t.Errorf("policy show --net allow:db,pypi.org: code %d out %q err %q", code, out, errs)
	}
	// A run's outputs are refused where nothing runs (--json was taken
	// and ignored; found by a tester).
	for _, args := range [][]string{{"policy", "show", "--json"}, {"policy", "explain", "--report", "r.json", "--", "ls"}, {"policy", "show", "--audit", "a.jsonl"}} {
		if code, _, errs := moat(t, ws, args...); code != 2 || !strings.Contains(errs, "is moat run's") {
			t.Errorf("%v: code %d err %q, want refused", args, code, errs)
		}
	}
	// Nor does their help list them; moat run's does (the control).
	if _, out, _ := moat(t, ws, "policy", "show", "--help"); strings.Contains(out, "  --json") || strings.Contains(out, "  --report") {
		t.Errorf("policy show --help lists a run's outputs: %q", out)
	}
	if _, out, _ := moat(t, ws, "run", "--help"); !strings.Contains(out, "  --json") {
		t.Errorf("run --help: %q", out)
	}
	// --net allow: given twice allows both lists; another mode given
	// after it is the last word.
	if code, out, errs := moat(t, ws, "policy", "show", "--net", "allow:db", "--net", "allow:pypi.org"); code != 0 || !strings.Contains(out, `'db'`) || !strings.Contains(out, `'pypi.org'`) {
		t.Errorf("policy show --net allow:db --net allow:pypi.org: code %d out %q err %q", code, out, errs)
	}
	if code, out, errs := moat(t, ws, "policy", "show", "--net", "allow:db", "--net", "none"); code != 0 || strings.Contains(out, `'db'`) || !strings.Contains(out, `mode = 'none'`) {
		t.Errorf("policy show --net allow:db --net none: code %d out %q err %q", code, out, errs)
	}
}

// TestInputsMustBeRegularFiles: a named pipe, a device or an oversized file
// given as a policy or a seccomp profile is refused at once with an error
// naming it, instead of hanging on the pipe or reading /dev/zero for ever.
func TestInputsMustBeRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.json")
	if err := os.WriteFile(huge, bytes.Repeat([]byte(" "), 5<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--seccomp", fifo, "--", "true"}, fifo + ": not a regular file (a named pipe)"},
		{[]string{"run", "--seccomp", "/dev/zero", "--", "true"}, "/dev/zero: not a regular file (a character device)"},
		{[]string{"run", "--seccomp", huge, "--", "true"}, huge + ": file too large: larger than 4 MiB"},
		{[]string{"run", "--policy", fifo, "--", "true"}, fifo + ": not a regular file (a named pipe)"},
		{[]string{"mcp", "--policy", fifo}, fifo + ": not a regular file (a named pipe)"},
		{[]string{"seccomp", "check", fifo}, fifo + ": not a regular file (a named pipe)"},
		{[]string{"seccomp", "check", "/dev/zero"}, "/dev/zero: not a regular file"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			type result struct {
				code int
				errs string
			}
			done := make(chan result, 1)
			go func() {
				code, _, errs := moat(t, dir, c.args...)
				done <- result{code, errs}
			}()
			select {
			case r := <-done:
				if r.code != exitMoatError || !strings.Contains(r.errs, c.want) {
					t.Errorf("code %d, stderr %q: want %d and %q", r.code, r.errs, exitMoatError, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("moat still running after 10s")
			}
		})
	}
}

// TestExpectedFallbackNotPrinted: clone3 answered ENOSYS by the default
// profile is what libc expects (it then uses clone): the report keeps the
// denial, marked as a fallback, and stderr does not mention it, while an
// ordinary denial in the same run is still printed.
func TestExpectedFallbackNotPrinted(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("needs perl, to make a clone3 call")
	}
	code, out, errs := moat(t, t.TempDir(), "run", "--json", "--", "sh", "-c",
		"unshare -U true 2>/dev/null; perl -e 'syscall(435, 0, 0)'")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var rep struct {
		Denials []backend.Denial `json:"denials"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatal(err)
	}
	var clone3, unshare bool
	for _, d := range rep.Denials {
		switch d.What {
		case "clone3":
			clone3 = d.Errno == "ENOSYS" && d.Fallback == "clone" && d.Hint == ""
		case "unshare":
			unshare = d.Fallback == ""
		}
	}
	if !clone3 || !unshare {
		t.Errorf("report denials %+v: want clone3 (ENOSYS, fallback clone) and unshare (no fallback)", rep.Denials)
	}
	if strings.Contains(errs, "clone3") || !strings.Contains(errs, "refused: unshare ×1 (EPERM") {
		t.Errorf("stderr %q: want unshare's denial and not clone3's", errs)
	}
}

// TestCustomProfileIsTheCommands: a custom profile constrains the command
// from its execve on, never moat's own init. A profile under which no
// program can start is refused up front with what it lacks; an allow-list
// that refuses what init itself needs still runs a command it suits; and
// a kill by the profile is reported as one, not as a timeout or a signal
// of unknown cause.
func TestCustomProfileIsTheCommands(t *testing.T) {
	if sandbox.SeccompNativeArch() == "" {
		t.Skip("no seccomp filters for this architecture")
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The classic teaching example: no execve, so nothing can start.
	minimal := write("minimal.json", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [
		{"names": ["read", "write", "exit", "exit_group"], "action": "SCMP_ACT_ALLOW"},
		{"names": ["openat"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 2, "value": 0, "op": "SCMP_CMP_EQ"}]}]}`)
	// What /bin/true needs and nothing more: no wait4, clone, futex or
	// ioctl, which moat's init uses after the command has started.
	const startup = `"execve", "brk", "arch_prctl", "mmap", "mprotect", "munmap", "openat", "read", "write", "close",
		"newfstatat", "fstat", "pread64", "access", "readlink", "set_tid_address", "set_robust_list", "rseq", "prlimit64",
		"getrandom", "exit", "exit_group"`
	tight := write("tight.json", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": [`+startup+`], "action": "SCMP_ACT_ALLOW"}]}`)
	killing := write("killing.json", `{"defaultAction": "SCMP_ACT_KILL_PROCESS", "syscalls": [{"names": [`+startup+`], "action": "SCMP_ACT_ALLOW"}]}`)

	noDump := func(t *testing.T, errs string) {
		t.Helper()
		for _, bad := range []string{"goroutine ", "fatal error", "runtime."} {
			if strings.Contains(errs, bad) {
				t.Errorf("stderr has a Go crash dump (%q):\n%s", bad, errs)
			}
		}
	}
	t.Run("no program can start", func(t *testing.T) {
		const want = "no program can start under this profile: it refuses execve, mprotect, mmap"
		code, out, errs := moat(t, dir, "run", "--seccomp", minimal, "--", "echo", "RAN")
		if code != exitMoatError || strings.Contains(out, "RAN") || !strings.Contains(errs, want) {
			t.Errorf("run: code %d, stdout %q, stderr %q: want %d, no run and %q", code, out, errs, exitMoatError, want)
		}
		noDump(t, errs)
		code, _, errs = moat(t, dir, "seccomp", "check", minimal)
		if code != exitMoatError || !strings.Contains(errs, want) {
			t.Errorf("check: code %d, stderr %q: want %d and %q", code, errs, exitMoatError, want)
		}
	})
	t.Run("an allow-list for the command", func(t *testing.T) {
		code, _, errs := moat(t, dir, "run", "--seccomp", tight, "--", "true")
		if code != 0 {
			t.Errorf("code %d, stderr %q: want 0", code, errs)
		}
		noDump(t, errs)
	})
	t.Run("killed by the profile", func(t *testing.T) {
		code, _, errs := moat(t, dir, "run", "--wall", "20s", "--seccomp", killing, "--", "sh", "-c", "exit 0")
		const want = "command killed by the seccomp profile"
		if code != 128+int(syscall.SIGSYS) || !strings.Contains(errs, want) {
			t.Errorf("code %d, stderr %q: want %d and %q", code, errs, 128+int(syscall.SIGSYS), want)
		}
		noDump(t, errs)
	})
}

// TestIsolationFlag: --isolation gvisor picks the gvisor backend, which
// refuses what it cannot enforce by name (a disk limit here), whether or
// not runsc is on this machine. The refusal is printed as the lines it
// is made of (what is missing on a line of its own), not as one line
// with its line ends escaped.
func TestIsolationFlag(t *testing.T) {
	ws := t.TempDir()
	code, _, errs := moat(t, ws, "run", "--isolation", "gvisor", "--workspace-mode", "overlay", "--disk", "16m", "--", "true")
	if code != exitMoatError || !strings.Contains(errs, "the gvisor backend cannot enforce") || !strings.Contains(errs, "disk limit") {
		t.Errorf("code %d err %q", code, errs)
	}
	if !strings.Contains(errs, "asks for:\n  ") || strings.Contains(errs, `\n`) {
		t.Errorf("the refusal is not printed in lines: %q", errs)
	}
}

// TestTrustCoversSecretProgram is the attack of a trusted .moat.toml whose
// secret is minted by a program in the workspace ("command:./mint"): moat
// runs that program on the host, outside any sandbox, at each run. The
// command rewrites it in direct mode, and the next run must be refused
// before anything runs on the host, rather than run the rewrite.
func TestTrustCoversSecretProgram(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	host := t.TempDir() // outside the workspace: only the host can write here
	mint := filepath.Join(ws, "mint")
	trusted := filepath.Join(host, "trusted-ran")
	evil := filepath.Join(host, "rewrite-ran")
	os.WriteFile(mint, []byte("#!/bin/sh\ntouch "+trusted+"\necho token\n"), 0o755)
	os.WriteFile(filepath.Join(ws, ".moat.toml"), []byte(`[network]
mode = "allow"
allow = ["api.example.com"]
[[secrets]]
name = "TOKEN"
source = "command:./mint"
hosts = ["api.example.com"]
`), 0o644)
	code, out, errs := moat(t, ws, "trust")
	if code != 0 || !strings.Contains(out, mint) {
		t.Fatalf("trust: code %d out %q err %q (want the program named)", code, out, errs)
	}

	// Positive control: the trusted program runs on the host. The
	// command cannot rewrite it in this run (it is read-only inside, as
	// the policy is); anything else that writes the workspace can, a
	// session or a run under another policy, and the trust is what
	// stops it then.
	rewrite := "#!/bin/sh\ntouch " + evil + "\necho token\n"
	code, out, errs = moat(t, ws, "run", "--", "sh", "-c", "echo RAN; printf '%s' '"+rewrite+"' > mint || echo REFUSED")
	if code != 0 || !strings.Contains(out, "RAN") || !strings.Contains(out, "REFUSED") {
		t.Fatalf("first run: code %d out %q err %q (want the program read-only inside)", code, out, errs)
	}
	if _, err := os.Stat(trusted); err != nil {
		t.Fatalf("the trusted program did not run on the host: %v", err)
	}
	if err := os.WriteFile(mint, []byte(rewrite), 0o755); err != nil {
		t.Fatal(err)
	}

	code, out, errs = moat(t, ws, "run", "--", "echo", "RAN")
	if _, err := os.Stat(evil); err == nil {
		t.Fatalf("moat ran the rewritten program on the host (code %d err %q)", code, errs)
	}
	if code != exitMoatError || strings.Contains(out, "RAN") || !strings.Contains(errs, mint) || !strings.Contains(errs, "moat trust") {
		t.Fatalf("run after the program changed: code %d out %q err %q (want a refusal naming %s and moat trust)", code, out, errs, mint)
	}
}

// TestStateDirNotWritable: moat's state directory holds the trusted
// policies, the quarantine and the change sets; a command that could
// write it would trust its own .moat.toml for the next run. A writable
// path or a workspace holding it is refused, whatever the policy says.
func TestStateDirNotWritable(t *testing.T) {
	parent := t.TempDir()
	state := filepath.Join(parent, "state")
	os.Mkdir(state, 0o700)
	t.Setenv("MOAT_STATE_DIR", state)
	trust := filepath.Join(state, "trusted-policies.json")
	ws := t.TempDir()

	// Positive control: a writable path beside it is written.
	other := filepath.Join(parent, "other")
	os.Mkdir(other, 0o755)
	code, _, errs := moat(t, ws, "run", "--rw", other, "--", "sh", "-c", "echo x > "+filepath.Join(other, "f"))
	if code != 0 {
		t.Fatalf("--rw beside the state directory: code %d err %q", code, errs)
	}

	code, _, errs = moat(t, ws, "run", "--rw", parent, "--", "sh", "-c", "echo '{}' > "+trust)
	if _, err := os.Stat(trust); err == nil {
		t.Fatalf("the command wrote the trusted policies (code %d err %q)", code, errs)
	}
	if code != exitMoatError || !strings.Contains(errs, state) {
		t.Errorf("--rw holding the state directory: code %d err %q (want a refusal naming %s)", code, errs, state)
	}
	code, _, errs = moat(t, parent, "run", "--", "sh", "-c", "echo '{}' > "+trust)
	if _, err := os.Stat(trust); err == nil {
		t.Fatalf("the command wrote the trusted policies from its workspace (code %d err %q)", code, errs)
	}
	if code != exitMoatError || !strings.Contains(errs, state) {
		t.Errorf("a workspace holding the state directory: code %d err %q (want a refusal naming %s)", code, errs, state)
	}
}

// TestNamedPolicyInWorkspaceReadOnly: a policy named with --policy that
// lives in the workspace, and the files it loads there, need no trust
// (the person named them), so a command that rewrote them in direct mode
// would choose the next run's policy, a secret's command on the host
// included. They are read-only inside, as .moat.toml is; the rest of the
// workspace is written (the control).
func TestNamedPolicyInWorkspaceReadOnly(t *testing.T) {
	if sandbox.SeccompNativeArch() == "" {
		t.Skip("no seccomp filters for this architecture")
	}
	ws := t.TempDir()
	pol := filepath.Join(ws, "ci", "moat.toml")
	prof := filepath.Join(ws, "ci", "profile.json")
	os.Mkdir(filepath.Dir(pol), 0o755)
	const doc = "[syscalls]\nprofile = \"profile.json\"\n"
	const profile = `{"defaultAction": "SCMP_ACT_ALLOW"}`
	os.WriteFile(pol, []byte(doc), 0o644)
	os.WriteFile(prof, []byte(profile), 0o644)
	code, out, errs := moat(t, ws, "run", "--policy", "ci/moat.toml", "--", "sh", "-c",
		"echo x > ci/other.txt && echo WROTE; echo '[network]' >> ci/moat.toml || echo POLICY-REFUSED; echo '{}' > ci/profile.json || echo PROFILE-REFUSED; true")
	if b, _ := os.ReadFile(filepath.Join(ws, "ci", "other.txt")); string(b) != "x\n" {
		t.Errorf("the control file beside the policy was not written: %q", b)
	}
	if code != 0 || !strings.Contains(out, "WROTE") {
		t.Fatalf("code %d out %q err %q (want the workspace written)", code, out, errs)
	}
	if b, _ := os.ReadFile(pol); string(b) != doc || !strings.Contains(out, "POLICY-REFUSED") {
		t.Errorf("the command rewrote the policy it runs under: %q (out %q)", b, out)
	}
	if b, _ := os.ReadFile(prof); string(b) != profile || !strings.Contains(out, "PROFILE-REFUSED") {
		t.Errorf("the command rewrote the policy's profile: %q (out %q)", b, out)
	}
}

// A command that puts a link to a directory of its choosing where a
// directory of --audit's or --report's path lies, in its workspace, does
// not lead the next run's records through it: every component of the
// path is checked, not only the last, and the refusal names the link.
// The control: the same paths through the real directory are written.
func TestRecordFilesNotThroughALinkedDirectory(t *testing.T) {
	ws := t.TempDir()
	victim := t.TempDir()
	if code, _, errs := moat(t, ws, "run", "--", "sh", "-c", "mkdir real && ln -s "+victim+" out"); code != 0 {
		t.Fatalf("code %d err %q", code, errs)
	}
	for _, flag := range []string{"--audit", "--report"} {
		os.Remove(filepath.Join(ws, "ran"))
		code, _, errs := moat(t, ws, "run", flag, "out/record.json", "--", "touch", "ran")
		if _, err := os.Stat(filepath.Join(ws, "ran")); code != exitMoatError || err == nil || !strings.Contains(errs, filepath.Join(ws, "out")+" is a symbolic link") {
			t.Errorf("%s through a linked directory: code %d, ran: %v, err %q", flag, code, err == nil, errs)
		}
		if _, err := os.Stat(filepath.Join(victim, "record.json")); err == nil {
			t.Errorf("%s: written through the link", flag)
		}
		// The control.
		if code, _, errs := moat(t, ws, "run", flag, "real/record"+flag+".json", "--", "touch", "ran"); code != 0 {
			t.Errorf("the control %s: code %d err %q", flag, code, errs)
		}
		if _, err := os.Stat(filepath.Join(ws, "real", "record"+flag+".json")); err != nil {
			t.Errorf("the control %s: %v", flag, err)
		}
	}
}

// TestDoctorInterrupted: moat doctor stopped by SIGTERM part way stops the
// probe under way and leaves none of its temporary directories in /tmp
// (before, each kill left one, tried).
func TestDoctorInterrupted(t *testing.T) {
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "moat-doctor-*"))
	for _, delay := range []time.Duration{50, 150, 300} {
		cmd := exec.Command(os.Args[0], "doctor")
		cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay * time.Millisecond)
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "moat-doctor-*"))
	for _, d := range after {
		if !slices.Contains(before, d) {
			t.Errorf("left behind: %s", d)
		}
	}
}

// TestUnknownCommandListsEveryCommand: the list an unknown command gets
// names every command the usage shows (it left out fetch).
func TestUnknownCommandListsEveryCommand(t *testing.T) {
	_, usage, uerrs := moat(t, t.TempDir(), "--help")
	_, _, errs := moat(t, t.TempDir(), "bogus")
	for _, line := range strings.Split(usage+uerrs, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "moat" {
			continue
		}
		if !strings.Contains(errs, " "+f[1]+",") && !strings.Contains(errs, " "+f[1]+")") {
			t.Errorf("the unknown command's list leaves out %s: %q", f[1], errs)
		}
	}
	// A near miss is named (a tester's rnu); a word near none is not.
	if _, _, errs := moat(t, t.TempDir(), "rnu"); !strings.Contains(errs, "did you mean run") {
		t.Errorf("rnu: %q", errs)
	}
	if _, _, errs := moat(t, t.TempDir(), "xyzzyq"); strings.Contains(errs, "did you mean") {
		t.Errorf("xyzzyq: %q", errs)
	}
}

// TestServeRefusedBeforeState: a second daemon on a live socket is
// refused before it makes a state directory (an empty one was left).
func TestServeRefusedBeforeState(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "live.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	state := filepath.Join(dir, "state")
	t.Setenv("MOAT_STATE_DIR", state)
	code, _, errs := moat(t, dir, "serve", "--socket", sock)
	if code == 0 || !strings.Contains(errs, "a daemon already listens on "+sock) {
		t.Errorf("serve on a live socket: %d %q", code, errs)
	}
	if _, err := os.Stat(state); err == nil {
		t.Errorf("the refused daemon made its state directory %s", state)
	}
}

// TestUSRSignalsForwarded: SIGUSR1 and SIGUSR2 to moat reach the command
// (a server's reload, a runner's dump), as SIGTERM does; they were
// caught by moat and dropped (found by a tester). The control: the trap
// for SIGTERM sees it as before.
func TestUSRSignalsForwarded(t *testing.T) {
	ws := t.TempDir()
	cmd, out := startReady(t, ws, `trap 'echo got-USR1' USR1; trap 'echo got-USR2' USR2; trap 'echo got-TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	defer cmd.Process.Kill()
	time.Sleep(200 * time.Millisecond) // moat's handlers come after 50 ms
	for _, s := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM} {
		cmd.Process.Signal(s)
		time.Sleep(150 * time.Millisecond)
	}
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil || string(rest) != "got-USR1\ngot-USR2\ngot-TERM\n" {
		t.Errorf("the command saw %q (%v), want each signal in turn", rest, err)
	}
}

// TestDanglingLocalPolicyRefused: a workspace's .moat.toml that is a
// symbolic link leading nowhere is refused, naming it; the command ran
// under the built-in policy without a word before (found by a tester).
// The control: without the link, the run goes on under the built-in one.
func TestDanglingLocalPolicyRefused(t *testing.T) {
	ws := t.TempDir()
	if err := os.Symlink(filepath.Join(ws, "nothere.toml"), filepath.Join(ws, ".moat.toml")); err != nil {
		t.Fatal(err)
	}
	code, out, errs := moat(t, ws, "run", "--", "/bin/echo", "RAN")
	if code != 125 || strings.Contains(out, "RAN") || !strings.Contains(errs, ".moat.toml is a symbolic link that leads nowhere") {
		t.Errorf("dangling .moat.toml: exit %d, %q %q", code, out, errs)
	}
	os.Remove(filepath.Join(ws, ".moat.toml"))
	if code, out, errs := moat(t, ws, "run", "--", "/bin/echo", "RAN"); code != 0 || !strings.Contains(out, "RAN") {
		t.Errorf("control: exit %d, %q %q", code, out, errs)
	}
}
