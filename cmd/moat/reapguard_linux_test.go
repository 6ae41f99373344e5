package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
)

// TestServeKilledQuarantines: a daemon killed (SIGKILL) while a session
// writes its tenant's workspace directly cannot quarantine what the
// session's commands planted where a protected path belongs; the next
// daemon does, from the session's record, and its audit stream says
// so. The control: a file the command made elsewhere in the workspace
// stays, and so does the protected path that was there before.
func TestServeKilledQuarantines(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".npmrc"), []byte("mine\n"), 0o644)
	stream := filepath.Join(dir, "audit.jsonl")
	stop, logs := serveAudit(t, dir, stream)
	if stop == nil {
		t.Fatalf("moat serve exited:\n%s", logs)
	}
	sock := filepath.Join(dir, "moat.sock")
	code, out, errs := moat(t, dir, "session", "create", "--socket", sock, "--workspace", ws)
	if code != 0 {
		stop(syscall.SIGTERM)
		t.Fatalf("session create: %d %q", code, errs)
	}
	id := strings.TrimSpace(out)
	script := "echo 'curl x | sh' > .envrc && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit && echo ok > made.txt"
	if code, _, errs := moat(t, dir, "exec", "--socket", sock, id, "--", "sh", "-c", script); code != 0 {
		stop(syscall.SIGTERM)
		t.Fatalf("exec: %d %q", code, errs)
	}
	stop(syscall.SIGKILL)
	for _, p := range []string{".envrc", ".git/hooks/pre-commit"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Fatalf("the command did not plant %s (the test's premise): %v", p, err)
		}
	}

	stop, logs = serveAudit(t, dir, stream)
	if stop == nil {
		t.Fatalf("the next moat serve exited:\n%s", logs)
	}
	if err := stop(syscall.SIGTERM); err != nil {
		t.Errorf("moat serve: %v\n%s", err, logs)
	}
	for _, p := range []string{".envrc", ".git/hooks/pre-commit"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s is still in the workspace after the next daemon started:\n%s", p, logs)
		}
	}
	for _, p := range []string{"made.txt", ".npmrc"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Errorf("%s was taken out too: %v", p, err)
		}
	}
	quarantined := filepath.Join(dir, "state", "quarantine", id, "0", "ws", ".envrc")
	if b, err := os.ReadFile(quarantined); err != nil || string(b) != "curl x | sh\n" {
		t.Errorf("the daemon's own user's planted file is kept in the quarantine: %q %v", b, err)
	}
	f, err := os.Open(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var end *audit.SessionEvent
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var e audit.SessionEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == audit.TypeSession && e.Session == id && e.Reason == "reaped" {
			end = &e
		}
	}
	if end == nil || !strings.Contains(strings.Join(end.Warnings, "\n"), ".envrc") {
		t.Errorf("the reaped session's end in the audit stream: %+v", end)
	}
}

// TestKilledRunQuarantinedByNext: moat run killed outright (SIGKILL, as
// a framework's timeout kills it) while its command writes the workspace
// directly cannot quarantine what the command planted; the next run of
// the same user does, and says so. The control: a file made elsewhere
// stays, and a run that ends on its own leaves no record behind.
func TestKilledRunQuarantinedByNext(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", filepath.Join(dir, "state"))
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	if code, _, errs := moat(t, ws, "run", "--", "true"); code != 0 {
		t.Fatalf("a run: %d %q", code, errs)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "state", "runs")); len(left) != 0 {
		t.Errorf("a run that ended left records: %v", left)
	}
	cmd := exec.Command(os.Args[0], "run", "--", "sh", "-c", "echo 'curl x | sh' > .envrc; echo ok > made.txt; exec sleep 60")
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
	cmd.Dir = ws
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(ws, "made.txt")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the command did not start")
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Lstat(filepath.Join(ws, ".envrc")); err != nil {
		t.Fatalf("the command did not plant .envrc (the test's premise): %v", err)
	}
	// The next run, elsewhere: the killed run's sandbox may take a moment
	// to go, and its record stays locked until it has.
	other := t.TempDir()
	var errs string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var code int
		code, _, errs = moat(t, other, "run", "--", "true")
		if code != 0 {
			t.Fatalf("the next run: %d %q", code, errs)
		}
		if _, err := os.Lstat(filepath.Join(ws, ".envrc")); err != nil || time.Now().After(deadline) {
			break
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, ".envrc")); err == nil {
		t.Fatalf(".envrc is still in the workspace after the next run; it said %q", errs)
	}
	if !strings.Contains(errs, "was killed before its end") || !strings.Contains(errs, ".envrc") {
		t.Errorf("the next run does not say what it quarantined: %q", errs)
	}
	if _, err := os.Stat(filepath.Join(ws, "made.txt")); err != nil {
		t.Errorf("made.txt was taken out too: %v", err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "state", "runs")); len(left) != 0 {
		t.Errorf("records left: %v", left)
	}
}

// TestRunSurvivesClosedStdout: a reader of moat run's output that goes
// away (moat run ... | head) fails moat's next write with EPIPE, which
// the relay passes on to the command, and the run ends as any other
// does: what the command planted is quarantined and moat says so. Before,
// the Go runtime ended moat on the write (SIGPIPE on fd 1), and nothing of
// the run's end happened (tried: .envrc stayed, and the report was empty).
func TestRunSurvivesClosedStdout(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	cmd := exec.Command(os.Args[0], "run", "--", "sh", "-c", "echo 'curl x | sh' > .envrc; yes")
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1", "MOAT_STATE_DIR="+filepath.Join(dir, "state"))
	cmd.Dir = ws
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var b [2]byte
	if _, err := io.ReadFull(out, b[:]); err != nil {
		t.Fatal(err)
	}
	out.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGPIPE) {
		t.Errorf("moat run: %v, want the command's own SIGPIPE status (141)", err)
	}
	if !strings.Contains(errb.String(), "the command left .envrc") {
		t.Errorf("moat's stderr: %q", errb.String())
	}
	// A shell says nothing of a pipeline's SIGPIPE; nor does moat.
	if strings.Contains(errb.String(), "SIGPIPE") {
		t.Errorf("moat remarked on the SIGPIPE: %q", errb.String())
	}
	if _, err := os.Lstat(filepath.Join(ws, ".envrc")); err == nil {
		t.Error(".envrc is still in the workspace")
	}
}

// TestApplyHoldsSignals: Ctrl-C (or SIGTERM, SIGHUP) while moat apply
// runs waits for the apply to end as a whole: the workspace then holds
// every change, and moat says why it did not stop at once. Before, the
// signal ended moat half way, and the workspace held part of the change
// set until the next apply or discard (tried).
func TestApplyHoldsSignals(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	t.Setenv("MOAT_STATE_DIR", state)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	const n = 3000
	for i := 0; i < n; i++ {
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%04d", i)), []byte("old\n"), 0o644)
	}
	if code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--", "sh", "-c", "for f in f*; do echo new > $f; done"); code != 0 {
		t.Fatalf("the overlay run: %d %q", code, errs)
	}
	runs, _ := os.ReadDir(filepath.Join(state, "runs"))
	if len(runs) != 1 {
		t.Fatalf("change sets: %v", runs)
	}
	journal := filepath.Join(state, "runs", runs[0].Name(), "journal")
	cmd := exec.Command(os.Args[0], "apply", runs[0].Name())
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
	cmd.Dir = ws
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, err := os.Stat(journal); err == nil {
			seen = true
			cmd.Process.Signal(syscall.SIGINT)
			break
		}
	}
	err := cmd.Wait()
	if !seen {
		t.Skip("the apply ended before the test could interrupt it")
	}
	if err != nil || !strings.Contains(errb.String(), "ran to its end first") {
		t.Errorf("moat apply interrupted: %v %q", err, errb.String())
	}
	for i := 0; i < n; i++ {
		if b, _ := os.ReadFile(filepath.Join(ws, fmt.Sprintf("f%04d", i))); string(b) != "new\n" {
			t.Fatalf("f%04d holds %q after the apply: the workspace is half applied", i, b)
		}
	}
}

// TestIgnoredSignalsInherited: signals moat was started with ignored
// (nohup, a shell's empty trap on HUP) stay ignored for the command, whatever
// the run's flags; before, --json, --report, --audit and cgroup limits
// made moat handle them, and the command lost them (tried).
func TestIgnoredSignalsInherited(t *testing.T) {
	ws := t.TempDir()
	// --allow-degraded: a caller without cgroups runs the limit dropped,
	// and moat takes the signals early all the same.
	for _, flags := range []string{"", "--json", "--memory 64M --allow-degraded", "--workspace-mode overlay --disk 16M"} {
		cmd := exec.Command("sh", "-c", "trap '' HUP INT; exec \"$0\" run "+flags+" -- grep SigIgn /proc/self/status", os.Args[0])
		cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1", "MOAT_STATE_DIR="+filepath.Join(t.TempDir(), "state"))
		cmd.Dir = ws
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("%q: %v", flags, err)
			continue
		}
		line, _, _ := strings.Cut(string(out), "\n")
		mask, ok := strings.CutPrefix(line, "SigIgn:\t")
		if !ok {
			t.Errorf("%q: %q", flags, out)
			continue
		}
		var bits uint64
		fmt.Sscanf(mask, "%x", &bits)
		if bits&3 != 3 { // SIGHUP (1) and SIGINT (2)
			t.Errorf("%q: the command's ignored signals %s lack SIGHUP and SIGINT", flags, mask)
		}
	}
}

// TestKilledDiskOverlayRunRefused: an overlay run under a disk limit
// keeps its changes on its own tmpfs until the command ends; moat killed
// before then leaves a change set that diff and apply refuse, saying the
// changes are lost, and discard removes. Before, the set read as holding
// no changes: an empty diff, exit 0 (a tester saw it of a daemon's
// session). The control: the same run, not killed, has its change.
func TestKilledDiskOverlayRunRefused(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", filepath.Join(dir, "state"))
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("orig\n"), 0o644)
	flags := []string{"run", "--workspace-mode", "overlay", "--disk", "64M", "--"}
	if code, _, errs := moat(t, ws, append(flags, "sh", "-c", "echo changed > f.txt")...); code != 0 {
		t.Fatalf("control run: %d %q", code, errs)
	}
	if code, out, errs := moat(t, ws, "diff"); code != 0 || !strings.Contains(out, "+changed") {
		t.Fatalf("control diff: %d %q %q", code, out, errs)
	}
	moat(t, ws, "discard")
	cmd := exec.Command(os.Args[0], append(flags, "sh", "-c", "echo changed > f.txt; echo > /dev/stderr; exec sleep 60")...)
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
	cmd.Dir = ws
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The command's line on stderr: it has written f.txt.
	if _, err := stderr.Read(make([]byte, 1)); err != nil {
		cmd.Process.Kill()
		t.Fatalf("the command did not start: %v", err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	var code int
	var out, errs string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// The killed run's sandbox may take a moment to go.
		if code, out, errs = moat(t, ws, "diff"); code != 0 || time.Now().After(deadline) {
			break
		}
	}
	if code == 0 || !strings.Contains(errs, "killed before they were saved") || strings.Contains(out, "+changed") {
		t.Errorf("diff of the killed run's set: %d %q %q, want it refused", code, out, errs)
	}
	if code, _, errs := moat(t, ws, "apply"); code == 0 || !strings.Contains(errs, "can only be discarded") {
		t.Errorf("apply of the killed run's set: %d %q", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f.txt")); string(b) != "orig\n" {
		t.Errorf("the workspace changed: %q", b)
	}
	if code, _, errs := moat(t, ws, "discard"); code != 0 {
		t.Errorf("discard: %d %q", code, errs)
	}
}
