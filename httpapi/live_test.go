//go:build linux

package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// readUntil reads a background command's output until it contains want
// or ends, and returns what it read.
func readUntil(t *testing.T, c *client.Client, id, pid, stream, want string) string {
	t.Helper()
	var text string
	var next int64
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		o, err := c.Output(context.Background(), id, pid, next, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range o.Chunks {
			if ch.Stream == stream {
				text += ch.Data
			}
		}
		next = o.Next
		if strings.Contains(text, want) || !o.Running {
			break
		}
	}
	return text
}

// TestSessionIsOneSandbox: the commands of a session share one sandbox:
// its /tmp, and the processes left running in it.
func TestSessionIsOneSandbox(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo $$ > /tmp/first"}})
	if out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"cat", "/tmp/first"}}); rep.ExitCode != 0 || out == "" {
		t.Errorf("the second command does not see the first one's /tmp: %q %+v", out, rep)
	}
	// Positive control: another session has a /tmp of its own.
	other := d.create(t, &client.CreateSessionRequest{})
	if _, _, rep := run(t, d.c, other.ID, &client.ExecRequest{Args: []string{"cat", "/tmp/first"}}); rep.ExitCode == 0 {
		t.Error("another session sees this one's /tmp")
	}
}

// TestBackgroundServerReachedByExec: a server started in the background
// by one exec is reached by another, on the session's own loopback.
func TestBackgroundServerReachedByExec(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: it is the server and the client")
	}
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{})
	if err := d.c.WriteFile(ctx, s.ID, "index.html", []byte("served from the session\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := d.c.Start(ctx, s.ID, &client.ExecRequest{Args: []string{"python3", "-m", "http.server", "8765", "--bind", "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	fetch := `import time, urllib.request
for i in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:8765/index.html").read().decode(), end="")
        break
    except OSError:
        time.sleep(0.1)
`
	out, errs, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"python3", "-c", fetch}})
	if out != "served from the session\n" {
		t.Errorf("fetch: %q %q %+v", out, errs, rep)
	}
	// Positive control of the isolation: another session's loopback has
	// no such server.
	other := d.create(t, &client.CreateSessionRequest{})
	probe := `import socket
try:
    socket.create_connection(("127.0.0.1", 8765), timeout=2); print("reached")
except OSError:
    print("refused")
`
	if out, _, _ := run(t, d.c, other.ID, &client.ExecRequest{Args: []string{"python3", "-c", probe}}); out != "refused\n" {
		t.Errorf("another session reaches the server: %q", out)
	}
	if err := d.c.Signal(ctx, s.ID, srv.ID, "INT"); err != nil {
		t.Error(err)
	}
}

// TestBackgroundStdin: a background command started with its input open
// reads what later requests write, and ends when the input is closed.
func TestBackgroundStdin(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{})
	p, err := d.c.Start(ctx, s.ID, &client.ExecRequest{Args: []string{"cat"}, Stdin: "first\n", StdinOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	if out := readUntil(t, d.c, s.ID, p.ID, "stdout", "first\n"); out != "first\n" {
		t.Fatalf("the first input: %q", out)
	}
	// close takes true or 1 (as follow does); another value is refused,
	// not taken as false.
	stdinURL := "http://moat/v1/sessions/" + s.ID + "/processes/" + p.ID + "/stdin"
	if status, e := apiErr(t, rawClient(d.sock), "POST", stdinURL+"?close=yes", "", nil); status != 400 || e.Code != client.CodeBadRequest || !strings.Contains(e.Message, "close") {
		t.Errorf("close=yes: %d %+v, want 400 naming close", status, e)
	}
	if status, e := apiErr(t, rawClient(d.sock), "POST", stdinURL+"?close=1", "second\n", nil); status != 204 {
		t.Fatalf("close=1: %d %+v", status, e)
	}
	if out := readUntil(t, d.c, s.ID, p.ID, "stdout", "second\n"); out != "first\nsecond\n" {
		t.Errorf("after the second input: %q", out)
	}
	o, err := d.c.Output(ctx, s.ID, p.ID, 0, 5*time.Second)
	for err == nil && o.Running {
		o, err = d.c.Output(ctx, s.ID, p.ID, o.Next, 5*time.Second)
	}
	if err != nil || o.Exit == nil || o.Exit.ExitCode != 0 {
		t.Errorf("cat did not end with its input: %+v %v", o, err)
	}
	if err := d.c.WriteStdin(ctx, s.ID, p.ID, []byte("late"), false); apiCode(err) != client.CodeNoStdin {
		t.Errorf("a write after the end: %v", err)
	}
	// Positive control of the refusal: a command started without its input
	// open has none to write.
	q, err := d.c.Start(ctx, s.ID, &client.ExecRequest{Args: []string{"sleep", "10"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.c.WriteStdin(ctx, s.ID, q.ID, []byte("x"), false); apiCode(err) != client.CodeNoStdin {
		t.Errorf("a write to a command without input: %v", err)
	}
}

// TestPythonStateAcrossExecs: a Python interpreter kept running in the
// background keeps its variables across the requests that feed it.
func TestPythonStateAcrossExecs(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{})
	repl, err := d.c.Start(ctx, s.ID, &client.ExecRequest{Args: []string{"python3", "-u", "-i"}, StdinOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"x = 41\n", "print('x+1 =', x + 1)\n"} {
		if err := d.c.WriteStdin(ctx, s.ID, repl.ID, []byte(line), false); err != nil {
			t.Fatal(err)
		}
	}
	if out := readUntil(t, d.c, s.ID, repl.ID, "stdout", "x+1 = 42"); !strings.Contains(out, "x+1 = 42") {
		t.Errorf("the interpreter lost its state: %q", out)
	}
	// Another exec of the session sees the same sandbox the interpreter
	// writes to.
	if err := d.c.WriteStdin(ctx, s.ID, repl.ID, []byte("open('/tmp/from-repl', 'w').write('hi')\n"), false); err != nil {
		t.Fatal(err)
	}
	var out string
	for deadline := time.Now().Add(10 * time.Second); out != "hi" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, _, _ = run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "cat /tmp/from-repl 2>/dev/null"}})
	}
	if out != "hi" {
		t.Errorf("an exec does not see the interpreter's file: %q", out)
	}
}

// TestOverlaySession: an overlay session's commands see their own writes,
// the real workspace does not change, and the change set outlives the
// session for review.
func TestOverlaySession(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	ws := t.TempDir()
	s, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{Workspace: ws, WorkspaceMode: "overlay"})
	if apiCode(err) == client.CodeSandboxRefused && strings.Contains(err.Error(), "overlay") {
		t.Skipf("overlayfs cannot be mounted here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.ChangeSet == "" {
		t.Fatal("an overlay session names no change set")
	}
	run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo draft > notes"}})
	if out, _, _ := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"cat", "notes"}}); out != "draft\n" {
		t.Errorf("the session does not see its own write: %q", out)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes")); !os.IsNotExist(err) {
		t.Errorf("an overlay write reached the real workspace: %v", err)
	}
	if err := d.c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	// Change sets are kept in the state directory of package workspace.
	if _, err := os.Stat(filepath.Join(os.Getenv("MOAT_STATE_DIR"), "runs", s.ChangeSet)); err != nil {
		t.Errorf("the change set did not outlive the session: %v", err)
	}
}

// TestRulesDecideEachExec: the policy's rules decide every command of a
// session: a denied one does not run and says why, an allowed one runs.
func TestRulesDecideEachExec(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	pol := "[[rules]]\nmatch = { command = [\"touch\", \"forbidden\"] }\ndecision = \"deny\"\nreason = \"not this file\"\n"
	s := d.create(t, &client.CreateSessionRequest{Policy: pol})
	_, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"touch", "forbidden"}})
	if rep.Reason != "denied" || rep.ExitCode != 125 || !strings.Contains(rep.Error, "not this file") {
		t.Errorf("denied command: %+v", rep)
	}
	if _, err := d.c.Stat(context.Background(), s.ID, "forbidden"); apiCode(err) != client.CodeNotFound {
		t.Errorf("the denied command ran: %v", err)
	}
	if _, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"touch", "allowed"}}); rep.ExitCode != 0 {
		t.Errorf("allowed command: %+v", rep)
	}
	resp, err := rawClient(d.sock).Get("http://moat/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(data), "moat_denials_total 1\n") {
		t.Errorf("the denial is not counted:\n%s", data)
	}
}

// TestStdinBlockedSaysWhatWentIn: a write to the input of a command that
// does not read it ends stdin_blocked, saying how many of its bytes the
// pipe took (a retry must not send them again). The control: the command
// gets exactly those bytes once it reads.
func TestStdinBlockedSaysWhatWentIn(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{})
	p, err := d.c.Start(ctx, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "sleep 12; wc -c"}, StdinOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	err = d.c.WriteStdin(ctx, s.ID, p.ID, bytes.Repeat([]byte("x"), 1<<20), false)
	var n int
	if apiCode(err) != client.CodeStdinBlocked || !strings.Contains(err.Error(), "of the 1048576 bytes went in") {
		t.Fatalf("a write the command does not read: %v", err)
	}
	fmt.Sscanf(err.Error()[strings.Index(err.Error(), "the first ")+len("the first "):], "%d", &n)
	if err := d.c.WriteStdin(ctx, s.ID, p.ID, nil, true); err != nil {
		t.Fatal(err)
	}
	if out := readUntil(t, d.c, s.ID, p.ID, "stdout", "\n"); strings.TrimSpace(out) != strconv.Itoa(n) {
		t.Errorf("the command read %q bytes, the error said %d", out, n)
	}
}
