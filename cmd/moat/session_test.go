//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// startServe runs `moat serve` (this test binary as moat) on a socket in
// a temporary directory, and stops it with SIGTERM at the test's end,
// checking that it exits 0 and removes its socket.
func startServe(t *testing.T, extra ...string) (sock string, logs *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	sock = filepath.Join(dir, "moat.sock")
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--socket", sock, "--drain", "2s"}, extra...)...)
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1", "MOAT_STATE_DIR="+filepath.Join(dir, "state"))
	logs = &bytes.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// With --listen, the TCP listener comes up after the unix socket's:
	// wait for both (a test that went on to TCP found it refused).
	tcp := ""
	for i, a := range extra {
		if a == "--listen" && i+1 < len(extra) {
			tcp = extra[i+1]
		}
	}
	if _, port, err := net.SplitHostPort(tcp); err != nil || port == "0" {
		tcp = "" // a port the daemon picks: not known here
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		// Listening, not only bound: the socket file exists a moment
		// before the daemon accepts on it.
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			if tcp == "" {
				break
			}
			if tc, err := net.Dial("tcp", tcp); err == nil {
				tc.Close()
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("moat serve did not listen:\n%s", logs)
		}
	}
	// The socket is the daemon's user's alone, from the start, and its
	// making leaves nothing beside it.
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("the daemon's socket: %v %v, want a socket of mode 0600", fi.Mode(), err)
	}
	// The directory the socket was bound in goes once it is linked into
	// place, a moment after a client can connect.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left, _ := filepath.Glob(filepath.Join(dir, ".moat-sock-*"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("left beside the socket: %q", left)
			break
		}
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("moat serve: %v\n%s", err, logs)
			}
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			t.Errorf("moat serve did not stop on SIGTERM:\n%s", logs)
		}
		if _, err := os.Stat(sock); !os.IsNotExist(err) {
			t.Errorf("moat serve left its socket: %v", err)
		}
	})
	return sock, logs
}

func TestSessionCommands(t *testing.T) {
	sock, logs := startServe(t)
	dir := t.TempDir()
	code, out, errs := moat(t, dir, "session", "create", "--socket", sock, "--temp", "--ttl", "10m")
	id := strings.TrimSpace(out)
	if code != 0 || len(id) != 16 {
		t.Fatalf("session create: %d %q %q", code, out, errs)
	}
	for _, tc := range []struct {
		args       []string
		code       int
		out, errIn string
	}{
		{[]string{"--", "sh", "-c", "echo hello; echo oops >&2"}, 0, "hello\n", ""},
		{[]string{"--", "sh", "-c", "exit 3"}, 3, "", ""},
		{[]string{"--", "sh", "-c", "kill -TERM $$"}, 128 + 15, "", ""},
		{[]string{"--", "/nonexistent"}, 127, "", ""},
		{[]string{"--", "sh", "-c", "echo $A; mkdir sub"}, 0, "\n", ""},
	} {
		code, out, errs := moat(t, dir, append([]string{"exec", "--socket", sock, id}, tc.args...)...)
		if code != tc.code || out != tc.out || !strings.Contains(errs, tc.errIn) {
			t.Errorf("moat exec %q: %d %q %q, want %d %q", tc.args, code, out, errs, tc.code, tc.out)
		}
	}
	// Stdout and stderr one file (2>&1): the lines in the order written.
	// The control: two writers each get their own stream (above).
	script := `i=0; while [ $i -lt 100 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done`
	var both strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&both, "out%d\nerr%d\n", i, i)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() { b, _ := io.ReadAll(r); got <- string(b) }()
	code = realMain([]string{"exec", "--socket", sock, id, "--", "sh", "-c", script}, strings.NewReader(""), w, w)
	w.Close()
	if out := <-got; code != 0 || out != both.String() {
		t.Errorf("moat exec 2>&1: %d, not the lines in order: %.120q", code, out)
	}
	// A reader of the output that goes away (moat exec … | head) ends
	// the command, and moat exec as a shell's pipeline would: 141, with
	// nothing said. The control: the statuses above.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close()
	var pipeErr bytes.Buffer
	code = realMain([]string{"exec", "--socket", sock, id, "--", "yes"}, strings.NewReader(""), pw, &pipeErr)
	pw.Close()
	if code != 128+int(syscall.SIGPIPE) || pipeErr.Len() != 0 {
		t.Errorf("moat exec into a closed pipe: %d %q, want 141 and nothing said", code, pipeErr.String())
	}
	if code, out, errs := moat(t, dir, "exec", "--socket", sock, "--env", "A=b", "--dir", "sub", id, "--", "sh", "-c", "echo $A"); code != 0 || out != "b\n" {
		t.Errorf("exec --env: %d %q %q", code, out, errs)
	}
	if code, out, _ := moat(t, dir, "exec", "--socket", sock, "--wall", "200ms", id, "--", "sleep", "5"); code != 128+9 || out != "" {
		t.Errorf("exec --wall: %d", code)
	}
	if code, _, errs := moat(t, dir, "exec", "--socket", sock, "nosuchsession", "--", "true"); code != exitMoatError || !strings.Contains(errs, "not_found") {
		t.Errorf("exec in an unknown session: %d %q", code, errs)
	}
	code, pid, _ := moat(t, dir, "exec", "--socket", sock, "-d", id, "--", "sleep", "100")
	if code != 0 || strings.TrimSpace(pid) != "1" {
		t.Fatalf("exec -d: %d %q", code, pid)
	}
	if code, out, _ := moat(t, dir, "ps", "--socket", sock, id); code != 0 || !strings.Contains(out, "running") || !strings.Contains(out, "sleep 100") {
		t.Errorf("ps: %d %q", code, out)
	}
	// moat kill signals it (TERM unless -s names another); an unknown
	// signal is refused by name.
	if code, _, errs := moat(t, dir, "kill", "--socket", sock, "-s", "BOGUS", id, "1"); code != exitMoatError || !strings.Contains(errs, "bad_request") {
		t.Errorf("kill -s BOGUS: %d %q", code, errs)
	}
	if code, _, errs := moat(t, dir, "kill", "--socket", sock, id, "1"); code != 0 {
		t.Errorf("kill: %d %q", code, errs)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, out, _ := moat(t, dir, "ps", "--socket", sock, id); strings.Contains(out, "exited 143") {
			break
		}
		if time.Now().After(deadline) {
			t.Error("sleep 100 did not end on moat kill")
			break
		}
	}
	// moat logs -f: its stdout and stderr, each to its own, to the end.
	code, pid, _ = moat(t, dir, "exec", "--socket", sock, "-d", id, "--", "sh", "-c", "echo a; sleep 0.3; echo b >&2; echo c")
	if code != 0 {
		t.Fatalf("exec -d: %d", code)
	}
	if code, out, errs := moat(t, dir, "logs", "--socket", sock, "-f", id, strings.TrimSpace(pid)); code != 0 || out != "a\nc\n" || errs != "b\n" {
		t.Errorf("logs -f: %d %q %q", code, out, errs)
	}
	if code, _, errs := moat(t, dir, "logs", "--socket", sock, id, "99"); code != exitMoatError || !strings.Contains(errs, "not_found") {
		t.Errorf("logs of no such command: %d %q", code, errs)
	}
	if code, out, _ := moat(t, dir, "session", "ls", "--socket", sock); code != 0 || !strings.Contains(out, id) {
		t.Errorf("session ls: %d %q", code, out)
	}
	// -i streams any bytes, of any length, as they are read: the command
	// sees them unchanged; and a command that stops reading ends the
	// exec however much input is left.
	in := make([]byte, 3<<20)
	rand.Read(in)
	var out3 bytes.Buffer
	code = realMain([]string{"exec", "--socket", sock, "-i", id, "--", "sha256sum"}, bytes.NewReader(in), &out3, io.Discard)
	if sum := fmt.Sprintf("%x", sha256.Sum256(in)); code != 0 || !strings.HasPrefix(out3.String(), sum) {
		t.Errorf("exec -i of 3 MiB of binary input: %d %q, want %s", code, out3.String(), sum)
	}
	endless := make(chan int, 1)
	go func() {
		endless <- realMain([]string{"exec", "--socket", sock, "-i", id, "--", "head", "-c", "4"}, yes{}, io.Discard, io.Discard)
	}()
	select {
	case code := <-endless:
		if code != 0 {
			t.Errorf("exec -i of endless input to head: %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Error("exec -i of endless input did not end with the command")
	}
	// A policy that does not validate: its errors name the file and line.
	pf := filepath.Join(dir, "bad.toml")
	os.WriteFile(pf, []byte("[limits]\nmemory = \"lots\"\n"), 0o644)
	if code, _, errs := moat(t, dir, "session", "create", "--socket", sock, "--policy", pf); code != exitMoatError || !strings.Contains(errs, pf+":2: limits.memory") {
		t.Errorf("session create with a bad policy: %d %q", code, errs)
	}
	// moat cp, both ways, and a path that leads out refused.
	host := filepath.Join(dir, "in.txt")
	os.WriteFile(host, []byte("to the session\n"), 0o600)
	if code, _, errs := moat(t, dir, "cp", "--socket", sock, host, id+":sub/in.txt"); code != 0 {
		t.Errorf("cp to the session: %d %q", code, errs)
	}
	if code, out, _ := moat(t, dir, "exec", "--socket", sock, id, "--", "cat", "sub/in.txt"); code != 0 || out != "to the session\n" {
		t.Errorf("the session reads %d %q", code, out)
	}
	if code, out, errs := moat(t, dir, "cp", "--socket", sock, id+":sub/in.txt", "-"); code != 0 || out != "to the session\n" {
		t.Errorf("cp from the session: %d %q %q", code, out, errs)
	}
	// A directory named on either side takes the file under its name,
	// as cp does.
	two := filepath.Join(dir, "two.txt")
	os.WriteFile(two, []byte("second\n"), 0o600)
	for _, to := range []string{id + ":sub/", id + ":sub", id + ":."} {
		if code, _, errs := moat(t, dir, "cp", "--socket", sock, two, to); code != 0 {
			t.Errorf("cp to %s: %d %q", to, code, errs)
		}
	}
	if code, out, _ := moat(t, dir, "exec", "--socket", sock, id, "--", "cat", "sub/two.txt", "two.txt"); code != 0 || out != "second\nsecond\n" {
		t.Errorf("the files copied into directories: %d %q", code, out)
	}
	local := filepath.Join(dir, "local")
	os.Mkdir(local, 0o755)
	for _, to := range []string{local, local + "/"} {
		os.Remove(filepath.Join(local, "two.txt"))
		if code, _, errs := moat(t, dir, "cp", "--socket", sock, id+":sub/two.txt", to); code != 0 {
			t.Errorf("cp from the session to %s: %d %q", to, code, errs)
		}
		if b, err := os.ReadFile(filepath.Join(local, "two.txt")); err != nil || string(b) != "second\n" {
			t.Errorf("cp from the session to %s: %q %v", to, b, err)
		}
	}
	if code, _, errs := moat(t, dir, "cp", "--socket", sock, id+":../../x", "-"); code != exitMoatError || !strings.Contains(errs, "bad_request") {
		t.Errorf("cp of an escaping path: %d %q", code, errs)
	}
	if code, _, errs := moat(t, dir, "session", "rm", "--socket", sock, id); code != 0 {
		t.Errorf("session rm: %d %q", code, errs)
	}
	if code, out, _ := moat(t, dir, "session", "ls", "--socket", sock); code != 0 || strings.Contains(out, id) {
		t.Errorf("session ls after rm: %d %q", code, out)
	}
	if !strings.Contains(logs.String(), `"addr":"`+sock+`"`) {
		t.Errorf("the daemon's log does not name its socket %s:\n%s", sock, logs)
	}
	if !strings.Contains(logs.String(), `"msg":"session ended"`) {
		t.Errorf("the daemon's log lacks the session's end:\n%s", logs)
	}
}

func TestServeRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0"},
		{"serve", "--socket-mode", "9"},
		{"serve", "--socket", ""},
		{"serve", "--socket", dir + "/"},
		{"serve", "extra"},
		{"serve", "--tenant-memory", "lots"},
		// The daemon would take these as its defaults.
		{"serve", "--max-sessions", "-1"},
		{"serve", "--ttl", "-1h"},
		{"serve", "--idle-timeout", "0s"},
		{"serve", "--drain", "-5s"},
		{"serve", "--audit-burst", "0"},
		{"serve", "--audit-rate", "0"},
		{"serve", "--audit-rate", "NaN"},
		{"serve", "--audit-rate", "+Inf"},
		{"serve", "--audit-daemon-burst", "0"},
		{"serve", "--audit-daemon-rate", "NaN"},
		{"serve", "--audit-daemon-rate", "-1"},
	} {
		if code, _, errs := moat(t, dir, args...); code != 2 || errs == "" {
			t.Errorf("moat %q: %d %q", args, code, errs)
		}
	}
	// --web-url names the TCP listener's origin behind a proxy: an
	// origin only, and only with --listen. The control, a good one, gets
	// past it to the next check.
	for url, want := range map[string]string{
		"https://moat.example/approvals": "only an origin",
		"ftp://moat.example":             "http or https",
		"https://tok@moat.example":       "user information",
		"https://moat.example:8443":      "--listen needs --tokens",
	} {
		if code, _, errs := moat(t, dir, "serve", "--listen", "127.0.0.1:0", "--web-url", url); code != 2 || !strings.Contains(errs, want) {
			t.Errorf("--web-url %s: %d %q, want %q", url, code, errs, want)
		}
	}
	if code, _, errs := moat(t, dir, "serve", "--web-url", "https://moat.example"); code != 2 || !strings.Contains(errs, "--web-url needs --listen") {
		t.Errorf("--web-url without --listen: %d %q", code, errs)
	}
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	t.Setenv("MOAT_STATE_DIR", filepath.Join(dir, "state"))
	if code, _, errs := moat(t, dir, "serve", "--socket", filepath.Join(open, "s.sock")); code != exitMoatError || !strings.Contains(errs, "can be written by others") {
		t.Errorf("a socket in a directory others write: %d %q", code, errs)
	}
	if os.Geteuid() != 0 {
		// Only root's daemon records its sockets where other users' runs
		// find them; the daemons of the other tests, mode 0600, are the
		// control.
		for _, mode := range []string{"0666", "0660", "0622"} {
			if code, _, errs := moat(t, dir, "serve", "--socket-mode", mode, "--socket", filepath.Join(dir, "s.sock")); code != 2 || !strings.Contains(errs, "only root's daemon") {
				t.Errorf("--socket-mode %s as uid %d: %d %q", mode, os.Geteuid(), code, errs)
			}
		}
	}
	if code, _, errs := moat(t, dir, "exec", "onlysession"); code != 2 || !strings.Contains(errs, "usage") {
		t.Errorf("exec without a command: %d %q", code, errs)
	}
	if code, _, errs := moat(t, dir, "session", "ls", "--socket", filepath.Join(dir, "none.sock")); code != exitMoatError || !strings.Contains(errs, "moat serve running") {
		t.Errorf("no daemon: %d %q", code, errs)
	}
}

// A session command a limit ended gets a line saying so, as a run does;
// one that simply exited gets none.
func TestExecSummary(t *testing.T) {
	for reason, want := range map[string]string{
		"timeout": "wall-clock limit",
		"memory":  "memory limit",
		"output":  "output limit",
		"signal":  "died of signal (SIGKILL)",
		"budget":  "budget",
	} {
		got := execSummary(&client.ExitReport{Reason: reason, Signal: "SIGKILL", ExitCode: 137})
		if !strings.Contains(got, want) {
			t.Errorf("%s: %q lacks %q", reason, got, want)
		}
	}
	if got := execSummary(&client.ExitReport{Reason: "budget", Budget: "wall", ExitCode: 137}); !strings.Contains(got, "the wall budget") {
		t.Errorf("a spent budget is not named: %q", got)
	}
}

// A command that ended on its own as the output limit was reached was
// not killed: the line says what was dropped and the status it gave.
func TestOutputSummaryWithoutKill(t *testing.T) {
	p := policy.Default()
	sig := "SIGKILL"
	if got := summary(&sandbox.Report{Reason: "output", ExitCode: 137, Signal: &sig}, p); !strings.HasPrefix(got, "killed: output limit") {
		t.Errorf("killed: %q", got)
	}
	if got := summary(&sandbox.Report{Reason: "output", ExitCode: 0}, p); strings.Contains(got, "killed") || !strings.Contains(got, "exited with status 0") {
		t.Errorf("not killed: %q", got)
	}
	if got := execSummary(&client.ExitReport{Reason: "output", ExitCode: 0}); strings.Contains(got, "killed") || !strings.Contains(got, "exited with status 0") {
		t.Errorf("exec, not killed: %q", got)
	}
	// Never 0 with the output cut; any other status, and any other
	// reason's 0, as the command gave it.
	// The output budget cuts output as the limit does (moat exec exited 0
	// there, found by a tester); the wall budget does not.
	for _, c := range []struct {
		reason, budget string
		code, want     int
	}{{"output", "", 0, 137}, {"output", "", 3, 3}, {"output", "", 137, 137}, {"exit", "", 0, 0},
		{"budget", "output", 0, 137}, {"budget", "output", 2, 2}, {"budget", "wall", 0, 0},
		// A run the wall limit ended says it was killed: its status
		// says so too, whichever came first (found by a tester).
		{"timeout", "", 0, 137}, {"timeout", "", 137, 137}} {
		if got := cutStatus(c.reason, c.budget, c.code); got != c.want {
			t.Errorf("cutStatus(%s, %s, %d) = %d, want %d", c.reason, c.budget, c.code, got, c.want)
		}
	}
}

// TestExecNetworkLine: moat exec names what the session's proxy refused,
// and could not reach, while the command ran, as moat run does; the next
// command, which used no network, gets no such line (the control).
func TestExecNetworkLine(t *testing.T) {
	sock, _ := startServe(t)
	dir := t.TempDir()
	id := policySession(t, dir, sock, "[network]\nmode = \"allow\"\nallow = [\"nothing.invalid\"]\n")
	code, _, errs := moat(t, dir, "exec", "--socket", sock, id, "--", "sh", "-c",
		"curl -s -m 10 http://denied.test/ >/dev/null; curl -s -m 30 https://nothing.invalid/ >/dev/null; exit 0")
	want := "moat exec: network: refused denied.test:80 (default deny); could not reach nothing.invalid:443 (resolve nothing.invalid"
	if code != 0 || !strings.Contains(errs, want) {
		t.Errorf("moat exec: %d, stderr %q, want %q", code, errs, want)
	}
	if code, _, errs := moat(t, dir, "exec", "--socket", sock, id, "--", "true"); code != 0 || strings.Contains(errs, "network") {
		t.Errorf("control: a command that used no network: %d %q", code, errs)
	}
}

// policySession creates a session of the daemon on sock with an empty
// workspace under the policy text, written to a file in dir, and
// returns its id.
func policySession(t *testing.T, dir, sock, text string) string {
	t.Helper()
	pf := filepath.Join(dir, "session-policy.toml")
	if err := os.WriteFile(pf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := moat(t, dir, "session", "create", "--socket", sock, "--temp", "--policy", pf)
	id := strings.TrimSpace(out)
	if code != 0 || len(id) != 16 {
		t.Fatalf("session create: %d %q %q", code, out, errs)
	}
	return id
}

// yes is endless input.
type yes struct{}

func (yes) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'y'
	}
	return len(p), nil
}

// TestServeWarnsBeyondLoopback: a TCP listener beyond loopback is
// plain HTTP to the network: the daemon says so; on loopback (the
// control) it does not.
func TestServeWarnsBeyondLoopback(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("ci sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n"), 0o600)
	for addr, warn := range map[string]bool{"127.0.0.1:0": false, "0.0.0.0:0": true} {
		_, logs := startServe(t, "--listen", addr, "--tokens", tokens)
		// The lines are written as the listeners start serving, a moment
		// after the socket takes connections.
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), `"network":"tcp"`) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if got := strings.Contains(logs.String(), "without TLS"); got != warn {
			t.Errorf("--listen %s: warned %v, want %v:\n%s", addr, got, warn, logs)
		}
	}
}

// TestServeDrainAnswersDraining: while moat serve drains (SIGTERM, a
// command still running), a new request is answered 503 draining, which
// a client tells from a daemon that is gone; before, the listener closed
// at once and the client got "connection refused" (tried). The drain
// then ends, the daemon exits 0 and its socket goes.
func TestServeDrainAnswersDraining(t *testing.T) {
	cmd, sock, c, s, logs := serveWithSession(t, "3s")
	ctx := context.Background()
	// A foreground command: the drain waits for it.
	go c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"sleep", "2"}}, nil, nil)
	time.Sleep(300 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	_, err := c.CreateSession(ctx, &client.CreateSessionRequest{})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Code != client.CodeDraining {
		t.Errorf("a request while the daemon drains: %v, want %s", err, client.CodeDraining)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("moat serve: %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("moat serve did not stop:\n%s", logs.String())
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Error("the socket stayed")
	}
}

// TestServeSecondSignalCutsDrain: a second SIGTERM during a drain ends
// the running commands now instead of waiting out --drain (it was
// ignored). The control: after the first signal alone the daemon is still
// waiting for its command.
func TestServeSecondSignalCutsDrain(t *testing.T) {
	cmd, sock, c, s, logs := serveWithSession(t, "2m")
	ctx := context.Background()
	started := make(chan struct{})
	go c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo up; exec sleep 600"}}, writerFunc(func(p []byte) (int, error) {
		select {
		case <-started:
		default:
			close(started)
		}
		return len(p), nil
	}), nil)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatalf("the command did not start:\n%s", logs.String())
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		t.Fatalf("control: the daemon ended on the first signal, its command still running: %v\n%s", err, logs.String())
	case <-time.After(2 * time.Second):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("moat serve did not stop on a second signal:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "second signal") {
		t.Errorf("the log does not say the drain was cut short:\n%s", logs.String())
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Error("the socket stayed")
	}
}

// A limit that killed one process of a command that then exited by
// itself: the line gives the status, and does not say the command was
// killed. The control: a command the limit killed is.
func TestLimitSummaryWithoutKill(t *testing.T) {
	p := policy.Default()
	p.Limits.Memory, p.Limits.CPU, p.Limits.FileSize = 40<<20, policy.Duration(time.Second), 1<<20
	sig := "SIGKILL"
	for _, reason := range []string{"memory", "cpu", "file_size"} {
		if got := summary(&sandbox.Report{Reason: reason, ExitCode: 3}, p); strings.Contains(got, "killed:") || !strings.Contains(got, "exit 3") {
			t.Errorf("%s, exit 3: %q", reason, got)
		}
		if got := summary(&sandbox.Report{Reason: reason, ExitCode: 137, Signal: &sig}, p); !strings.HasPrefix(got, "killed (SIGKILL)") {
			t.Errorf("control: %s, killed: %q", reason, got)
		}
		if got := execSummary(&client.ExitReport{Reason: reason, ExitCode: 3}); strings.Contains(got, "killed") || !strings.Contains(got, "exit 3") {
			t.Errorf("exec, %s, exit 3: %q", reason, got)
		}
		if got := execSummary(&client.ExitReport{Reason: reason, ExitCode: 137, Signal: sig}); !strings.HasPrefix(got, "killed (SIGKILL)") {
			t.Errorf("control: exec, %s, killed: %q", reason, got)
		}
	}
}

// A run that ended by its own exit after a limit killed or refused one of
// its processes names each limit hit, with its value and flag.
func TestLimitsHitText(t *testing.T) {
	p := policy.Default()
	p.Limits.Memory, p.Limits.Pids = 64<<20, 50
	got := limitsHitText([]string{"memory", "pids"}, p)
	for _, w := range []string{"memory limit of 64MiB (--memory)", "process limit of 50 (--pids)"} {
		if !strings.Contains(got, w) {
			t.Errorf("limitsHitText = %q, want %q in it", got, w)
		}
	}
}

// TestServeQuitDrains: Ctrl-\ (SIGQUIT) ends moat serve as SIGTERM does,
// draining and removing its socket, with no dump of the Go runtime's
// goroutines (it printed one and left its sessions, found by a tester).
// The control: the daemon answered before the signal.
func TestServeQuitDrains(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "moat.sock")
	cmd := exec.Command(os.Args[0], "serve", "--socket", sock, "--drain", "1s")
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1", "MOAT_STATE_DIR="+filepath.Join(dir, "state"))
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	c := client.Unix(sock)
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.Sessions(context.Background()); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("control: moat serve: %v\n%s", err, logs.String())
		}
	}
	cmd.Process.Signal(syscall.SIGQUIT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("moat serve after SIGQUIT: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("moat serve did not end after SIGQUIT")
	}
	if strings.Contains(logs.String(), "goroutine ") {
		t.Errorf("a goroutine dump:\n%s", logs.String())
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket stays: %v", err)
	}
}

// writerFunc is an io.Writer of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// serveWithSession runs `moat serve` with --drain drain on a socket in a
// temporary directory, and makes a session of it. The daemon is killed
// and the client closed at the test's end, whatever the test did.
func serveWithSession(t *testing.T, drain string) (cmd *exec.Cmd, sock string, c *client.Client, s *client.Session, logs *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	sock = filepath.Join(dir, "moat.sock")
	cmd = exec.Command(os.Args[0], "serve", "--socket", sock, "--drain", drain)
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1", "MOAT_STATE_DIR="+filepath.Join(dir, "state"))
	logs = &bytes.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	c = client.Unix(sock)
	t.Cleanup(func() { c.Close() })
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s, err = c.CreateSession(context.Background(), &client.CreateSessionRequest{}); err == nil {
			return cmd, sock, c, s, logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("moat serve: %v\n%s", err, logs.String())
		}
	}
}
