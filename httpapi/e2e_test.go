//go:build linux

package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
	"github.com/moatbox/moat/internal/proctest"
)

// The native backend re-executes this test binary as a sandbox's init,
// and the gvisor backend binds it into its sandboxes as theirs; a test
// re-executes it as a daemon to kill it (MOAT_TEST_DAEMON).
func TestMain(m *testing.M) {
	native.MaybeInit()
	gvisor.MaybeForward()
	if sock := os.Getenv("MOAT_TEST_DAEMON"); sock != "" {
		os.Exit(serveForTest(sock))
	}
	if sock := os.Getenv("MOAT_TEST_CONNECT_PASS"); sock != "" {
		os.Exit(connectAndPass(sock))
	}
	if sock := os.Getenv("MOAT_TEST_CONNECT"); sock != "" {
		os.Exit(connectForTest(sock))
	}
	os.Exit(proctest.RunWithStateDir(m))
}

// serveForTest is a daemon in a process of its own, on the state
// directory of MOAT_STATE_DIR.
func serveForTest(sock string) int {
	cfg := daemon.Config{StateDir: os.Getenv("MOAT_STATE_DIR")}
	if q := os.Getenv("MOAT_TEST_TENANT_DISK"); q != "" {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cfg.TenantDisk = n
	}
	if dir := os.Getenv("MOAT_TEST_TEMPLATES"); dir != "" {
		if err := testTemplates(&cfg, dir, os.Getenv("MOAT_TEST_POOL")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if path := os.Getenv("MOAT_TEST_AUDIT"); path != "" {
		aw, err := audit.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer aw.Close()
		cfg.Audit = aw
	}
	m, err := daemon.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("MOAT_TEST_SOCKET_OPEN") != "" {
		os.Chmod(sock, 0o666) // for a test's other user
	}
	srv := (&httpapi.Server{Manager: m}).HTTPServer()
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	go func() { <-ch; srv.Close() }()
	srv.Serve(l)
	m.Shutdown(context.Background())
	return 0
}

type testDaemon struct {
	sock  string
	state string
	m     *daemon.Manager
	srv   *httpapi.Server
	c     *client.Client
	tcp   string // host:port when tokens were given
}

// startDaemon serves a fresh Manager on a unix socket in a temporary
// directory (and on loopback TCP when tokens is not nil), with a client of
// the socket; everything is shut down at the test's end.
func startDaemon(t testing.TB, cfg daemon.Config, tokens *httpapi.Tokens) *testDaemon {
	t.Helper()
	return startDaemonWith(t, cfg, tokens, nil)
}

// startDaemonWith is startDaemon with the server's fields set by opt
// before it serves.
func startDaemonWith(t testing.TB, cfg daemon.Config, tokens *httpapi.Tokens, opt func(*httpapi.Server)) *testDaemon {
	t.Helper()
	// Not t.TempDir: its parent is private, and TestUIDTenants connects
	// as another user.
	dir, err := os.MkdirTemp("", "moat-daemon-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(dir, "state")
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := &testDaemon{sock: filepath.Join(dir, "moat.sock"), state: cfg.StateDir, m: m}
	d.srv = &httpapi.Server{Manager: m, Tokens: tokens, StateDir: cfg.StateDir, AllowOrigins: []string{"https://allowed.example"}}
	if opt != nil {
		opt(d.srv)
	}
	hs := d.srv.HTTPServer()
	l, err := net.Listen("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d.sock, 0o666)
	go hs.Serve(l)
	if tokens != nil {
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		d.tcp = tl.Addr().String()
		go hs.Serve(tl)
	}
	d.c = client.Unix(d.sock)
	t.Cleanup(func() {
		d.c.Close()
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return d
}

func (d *testDaemon) create(t *testing.T, req *client.CreateSessionRequest) *client.Session {
	t.Helper()
	s, err := d.c.CreateSession(context.Background(), req)
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	return s
}

func run(t *testing.T, c *client.Client, id string, req *client.ExecRequest) (string, string, *client.ExitReport) {
	t.Helper()
	var out, errb bytes.Buffer
	rep, err := c.Exec(context.Background(), id, req, &out, &errb)
	if err != nil {
		t.Fatalf("exec %q: %v", req.Args, err)
	}
	return out.String(), errb.String(), rep
}

func apiCode(err error) string {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return fmt.Sprintf("not an API error: %v", err)
}

func TestSessionExecAndFiles(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{})
	if s.Workspace != "" {
		t.Errorf("a workspace the daemon made is shown as %q, want \"\"", s.Workspace)
	}
	out, errs, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo out; echo err >&2; echo kept > f; exit 3"}})
	if out != "out\n" || errs != "err\n" || rep.ExitCode != 3 || rep.Reason != "exit" {
		t.Fatalf("exec: stdout %q stderr %q report %+v", out, errs, rep)
	}
	// The workspace outlives the command: the next one reads the file.
	out, _, rep = run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"cat", "f"}})
	if out != "kept\n" || rep.ExitCode != 0 {
		t.Fatalf("second exec: %q %+v", out, rep)
	}
	// stderr_to_stdout: one pipe, all of it "stdout", in the order written
	// (the first exec, with two streams, is the control).
	interleave := []string{"sh", "-c", `i=0; while [ $i -lt 100 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done`}
	var both strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&both, "out%d\nerr%d\n", i, i)
	}
	if out, errs, _ := run(t, d.c, s.ID, &client.ExecRequest{Args: interleave, StderrToStdout: true}); out != both.String() || errs != "" {
		t.Errorf("stderr_to_stdout: stdout not the lines in order (%d bytes, %d expected): %.120q; stderr %q", len(out), both.Len(), out, errs)
	}
	bg, err := d.c.Start(ctx, s.ID, &client.ExecRequest{Args: interleave, StderrToStdout: true})
	if err != nil {
		t.Fatal(err)
	}
	var bgOut strings.Builder
	for next, deadline := int64(0), time.Now().Add(20*time.Second); ; {
		o, err := d.c.Output(ctx, s.ID, bg.ID, next, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range o.Chunks {
			if c.Stream != "stdout" {
				t.Errorf("stderr_to_stdout in the background: a chunk of %q", c.Stream)
			}
			bgOut.WriteString(c.Data)
		}
		next = o.Next
		if !o.Running || time.Now().After(deadline) {
			break
		}
	}
	if bgOut.String() != both.String() {
		t.Errorf("stderr_to_stdout in the background: not the lines in order: %.120q", bgOut.String())
	}
	out, _, _ = run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"cat"}, Stdin: "from stdin"})
	if out != "from stdin" {
		t.Errorf("stdin: got %q", out)
	}
	out, _, _ = run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "mkdir -p sub && cd sub && pwd && echo $GREETING"}, Env: []string{"GREETING=hello"}})
	if !strings.HasSuffix(out, "/sub\nhello\n") {
		t.Errorf("env: got %q", out)
	}
	_, _, rep = run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "kill -KILL $$"}})
	if rep.ExitCode != 128+9 || rep.Signal != "SIGKILL" {
		t.Errorf("killed command: %+v", rep)
	}
	list, err := d.c.Sessions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != s.ID || list[0].Execs != 7 {
		t.Fatalf("sessions: %+v, %v", list, err)
	}
	ws := filepath.Join(d.state, "daemon", "workspaces", s.ID)
	if _, err := os.Stat(filepath.Join(ws, "f")); err != nil {
		t.Fatalf("the file is not in the workspace the daemon made: %v", err)
	}
	if err := d.c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Errorf("the daemon's workspace outlived its session: %v", err)
	}
	// A session that ended is said to have, and why; another tenant's
	// is not found (the control: an id never used).
	if _, err := d.c.Session(ctx, s.ID); apiCode(err) != client.CodeEnded || !strings.Contains(err.Error(), "(deleted)") {
		t.Errorf("deleted session: %v", err)
	}
	if _, err := d.c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"true"}}, nil, nil); apiCode(err) != client.CodeEnded {
		t.Errorf("exec in a deleted session: %v", err)
	}
	if _, err := d.c.Session(ctx, "0123456789abcdef"); apiCode(err) != client.CodeNotFound {
		t.Errorf("a session never made: %v", err)
	}
}

// timedWriter records when each write arrived.
type timedWriter struct {
	mu    sync.Mutex
	start time.Time
	at    []time.Duration
	buf   bytes.Buffer
}

func (w *timedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at = append(w.at, time.Since(w.start))
	return w.buf.Write(p)
}

func TestExecStreamsOutputAsWritten(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	w := &timedWriter{start: time.Now()}
	rep, err := d.c.Exec(context.Background(), s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo first; sleep 2; echo second"}}, w, nil)
	if err != nil || rep.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, rep)
	}
	if w.buf.String() != "first\nsecond\n" || len(w.at) != 2 {
		t.Fatalf("output %q in %d writes", w.buf.String(), len(w.at))
	}
	if w.at[0] > 1500*time.Millisecond || w.at[1] < 2*time.Second {
		t.Errorf("first line arrived after %v, second after %v: output is not streamed", w.at[0], w.at[1])
	}
}

func TestBackgroundProcess(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{})
	p, err := d.c.Start(ctx, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "trap 'echo bye; exit 7' TERM; echo ready; while :; do sleep 0.05; done"}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := d.c.Output(ctx, s.ID, p.ID, 0, 10*time.Second)
	if err != nil || len(o.Chunks) == 0 || o.Chunks[0].Data != "ready\n" || !o.Running {
		t.Fatalf("output: %+v, %v", o, err)
	}
	ps, err := d.c.Processes(ctx, s.ID)
	if err != nil || len(ps) != 1 || !ps[0].Running {
		t.Fatalf("processes: %+v, %v", ps, err)
	}
	// Another command runs beside it.
	if out, _, _ := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"echo", "beside"}}); out != "beside\n" {
		t.Errorf("exec beside a background command: %q", out)
	}
	if err := d.c.Signal(ctx, s.ID, p.ID, "TERM"); err != nil {
		t.Fatal(err)
	}
	next := o.Next
	var text string
	deadline := time.Now().Add(10 * time.Second)
	for {
		o, err = d.c.Output(ctx, s.ID, p.ID, next, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range o.Chunks {
			if c.Stream == "stdout" {
				text += c.Data
			}
		}
		next = o.Next
		if !o.Running || time.Now().After(deadline) {
			break
		}
	}
	if o.Running || o.Exit == nil || o.Exit.ExitCode != 7 || text != "bye\n" {
		t.Fatalf("after TERM: running %v exit %+v output %q", o.Running, o.Exit, text)
	}
	if err := d.c.Signal(ctx, s.ID, p.ID, "TERM"); apiCode(err) != client.CodeNotRunning {
		t.Errorf("signal to an ended process: %v", err)
	}
	if err := d.c.Signal(ctx, s.ID, p.ID, "BOGUS"); apiCode(err) != client.CodeBadRequest {
		t.Errorf("unknown signal: %v", err)
	}
	if _, err := d.c.Output(ctx, s.ID, "99", 0, 0); apiCode(err) != client.CodeNotFound {
		t.Errorf("unknown process: %v", err)
	}
}

// rawClient sends requests as given, over the unix socket.
func rawClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

// apiErr sends a request and returns the status and the JSON error.
func apiErr(t *testing.T, hc *http.Client, method, url, body string, hdr map[string]string) (int, client.Error) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e struct{ Error client.Error }
	if resp.StatusCode/100 != 2 {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", method, url, ct)
		}
		if err := json.Unmarshal(data, &e); err != nil || e.Error.Code == "" {
			t.Errorf("%s %s: status %d with a body that is not a JSON error: %q", method, url, resp.StatusCode, data)
		}
	}
	return resp.StatusCode, e.Error
}

func TestBadInput(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	hc := rawClient(d.sock)
	huge := `{"policy":"` + strings.Repeat("#", 2<<20) + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		code, msg                string
	}{
		{"malformed JSON", "POST", "/v1/sessions", `{"ttl":`, nil, 400, client.CodeBadRequest, "malformed"},
		{"unknown field", "POST", "/v1/sessions", `{"tll":"1m"}`, nil, 400, client.CodeBadRequest, `unknown field "tll"`},
		{"two values", "POST", "/v1/sessions", `{} {}`, nil, 400, client.CodeBadRequest, "after the JSON value"},
		// What encoding/json lets pass, and a proxy in front would read
		// otherwise: a field in another case, a field given twice.
		{"field in another case", "POST", "/v1/sessions/" + s.ID + "/exec", `{"ARGS":["true"]}`, nil, 400, client.CodeBadRequest, `field "ARGS": the field is "args"`},
		{"field twice", "POST", "/v1/sessions/" + s.ID + "/exec", `{"args":["echo","a"],"args":["true"]}`, nil, 400, client.CodeBadRequest, `field "args" is given twice`},
		{"create's field in another case", "POST", "/v1/sessions", `{"TTL":"1m"}`, nil, 400, client.CodeBadRequest, `field "TTL": the field is "ttl"`},
		{"empty body", "POST", "/v1/sessions", ``, nil, 400, client.CodeBadRequest, "empty"},
		{"null body", "POST", "/v1/sessions", `null`, nil, 400, client.CodeBadRequest, "not a JSON object"},
		{"array body", "POST", "/v1/sessions", `[]`, nil, 400, client.CodeBadRequest, "not a JSON object"},
		{"huge body", "POST", "/v1/sessions", huge, nil, 413, client.CodeBodyTooLarge, "over"},
		{"bad duration", "POST", "/v1/sessions", `{"ttl":"soon"}`, nil, 400, client.CodeBadRequest, "ttl"},
		{"relative workspace", "POST", "/v1/sessions", `{"workspace":"rel"}`, nil, 403, client.CodeWorkspace, "absolute"},
		{"relative policy_file", "POST", "/v1/sessions", `{"policy":"","policy_file":"rel.toml"}`, nil, 400, client.CodeBadRequest, "policy_file \"rel.toml\" must be an absolute path"},
		{"missing workspace", "POST", "/v1/sessions", `{"workspace":"/nonexistent/x"}`, nil, 403, client.CodeWorkspace, "does not exist"},
		{"policy sets workspace", "POST", "/v1/sessions", `{"policy":"[workspace]\npath = \"/\"\n"}`, nil, 403, client.CodePolicyRefused, "workspace.path"},
		// What run refuses of a writable path is said before that it
		// shows the daemon's socket (it said only the latter).
		{"policy writes /", "POST", "/v1/sessions", `{"policy":"[filesystem]\nread_write = [\"/\"]\n"}`, nil, 400, client.CodeInvalidPolicy, ""},
		{"unknown session", "GET", "/v1/sessions/nope", ``, nil, 404, client.CodeNotFound, "no such session"},
		{"exec in unknown session", "POST", "/v1/sessions/nope/exec", `{"args":["true"]}`, nil, 404, client.CodeNotFound, "no such session"},
		{"unknown process", "GET", "/v1/sessions/" + s.ID + "/processes/nope/output", ``, nil, 404, client.CodeNotFound, `no such process "nope"`},
		{"empty args", "POST", "/v1/sessions/" + s.ID + "/exec", `{"args":[]}`, nil, 400, client.CodeBadRequest, "args"},
		{"empty program", "POST", "/v1/sessions/" + s.ID + "/exec", `{"args":[""]}`, nil, 400, client.CodeBadRequest, "args[0], the program, is empty"},
		{"long id", "GET", "/v1/sessions/" + strings.Repeat("a", 4096), ``, nil, 404, client.CodeNotFound, strings.Repeat("a", 64) + `..."`},
		{"dir escapes", "POST", "/v1/sessions/" + s.ID + "/exec", `{"args":["true"],"dir":"../x"}`, nil, 400, client.CodeBadRequest, "dir"},
		{"absolute dir", "POST", "/v1/sessions/" + s.ID + "/exec", `{"args":["true"],"dir":"/etc"}`, nil, 400, client.CodeBadRequest, "dir"},
		// Answered in the workspace's own terms (it was an exit 125
		// naming the daemon's path to the workspace).
		{"missing dir", "POST", "/v1/sessions/" + s.ID + "/exec", `{"args":["true"],"dir":"nope"}`, nil, 400, client.CodeBadRequest, `"nope" does not exist in the workspace`},
		{"no route", "GET", "/v2/nothing", ``, nil, 404, client.CodeNotFound, "endpoint"},
		{"wrong method", "PUT", "/v1/sessions", ``, nil, 405, client.CodeMethod, "(allowed: GET, POST)"},
		{"unclean path", "GET", "//v1/sessions", ``, nil, 404, client.CodeNotFound, "clean form"},
		{"NUL in args", "POST", "/v1/sessions/" + s.ID + "/exec", `{"args":["echo","a\u0000b"]}`, nil, 400, client.CodeBadRequest, "NUL"},
		{"wrong type", "POST", "/v1/sessions/" + s.ID + "/exec", `{"args":["true"],"rows":"ten"}`, nil, 400, client.CodeBadRequest, "field rows: a JSON string is not what it takes (an integer from 0 to 65535)"},
		{"browser origin", "GET", "/v1/sessions", ``, map[string]string{"Origin": "https://evil.example"}, 403, client.CodeOriginRefused, "browser"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, e := apiErr(t, hc, tc.method, "http://moat"+tc.path, tc.body, tc.hdr)
			if status != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("got %d %+v, want %d %s containing %q", status, e, tc.status, tc.code, tc.msg)
			}
			if strings.Contains(e.Message, d.state) || strings.Contains(e.Message, "goroutine") || strings.Contains(e.Message, "Go struct") {
				t.Errorf("the message shows the daemon's internals: %q", e.Message)
			}
		})
	}
	// Positive control of the origin check: a configured origin passes.
	if status, _ := apiErr(t, hc, "GET", "http://moat/v1/sessions", "", map[string]string{"Origin": "https://allowed.example"}); status != 200 {
		t.Errorf("an allowed origin got %d", status)
	}

	// A policy that does not validate: every error, with its line and field.
	_, err := d.c.CreateSession(context.Background(), &client.CreateSessionRequest{Policy: "[limits]\nmemory = \"lots\"\n[network]\nmode = \"sideways\"\n"})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Code != client.CodeInvalidPolicy || len(ae.Details) == 0 || !strings.HasPrefix(ae.Details[0], "policy:2: limits.memory") {
		t.Errorf("invalid policy: %#v", err)
	}
	if _, err := d.c.CreateSession(context.Background(), &client.CreateSessionRequest{Policy: "[network]\nmode = \"sideways\"\n"}); apiCode(err) != client.CodeInvalidPolicy {
		t.Errorf("policy failing validation: %v", err)
	}
	// The client's nil request is an object that sets nothing.
	if s, err := d.c.CreateSession(context.Background(), nil); err != nil {
		t.Errorf("CreateSession with a nil request: %v", err)
	} else {
		d.c.DeleteSession(context.Background(), s.ID)
	}
	// The daemon still serves.
	if out, _, _ := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"echo", "alive"}}); out != "alive\n" {
		t.Errorf("after bad input: %q", out)
	}
}

func TestPanicBecomesJSONError(t *testing.T) {
	// A Server without a Manager panics in every session handler.
	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := (&httpapi.Server{}).HTTPServer()
	go hs.Serve(l)
	defer hs.Close()
	hc := rawClient(sock)
	for range 2 {
		status, e := apiErr(t, hc, "GET", "http://moat/v1/sessions", "", nil)
		if status != 500 || e.Code != client.CodeInternal || strings.Contains(e.Message, "nil pointer") {
			t.Fatalf("panic: got %d %+v", status, e)
		}
	}
}

// aliceAndBob loads a tokens file naming two token tenants, alice and
// bob, with the tokens given.
func aliceAndBob(t *testing.T, alice, bob string) *httpapi.Tokens {
	t.Helper()
	tf := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tf, []byte("# tenants\n"+httpapi.HashToken("alice", alice)+"\n"+httpapi.HashToken("bob", bob)+"\n"), 0o600)
	tokens, err := httpapi.LoadTokens(tf)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

func TestTokensSeparateTenants(t *testing.T) {
	dir := t.TempDir()
	tokens := aliceAndBob(t, "tok-a", "tok-b")
	d := startDaemon(t, daemon.Config{}, tokens)
	ctx := context.Background()
	alice, bob := client.TCP(d.tcp, "tok-a"), client.TCP(d.tcp, "tok-b")
	defer alice.Close()
	defer bob.Close()
	s, err := alice.CreateSession(ctx, &client.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Tenant != "token:alice" {
		t.Errorf("tenant %q", s.Tenant)
	}
	// Positive control: alice reaches her session.
	if out, _, _ := run(t, alice, s.ID, &client.ExecRequest{Args: []string{"echo", "mine"}}); out != "mine\n" {
		t.Fatalf("alice's exec: %q", out)
	}
	if _, err := bob.Session(ctx, s.ID); apiCode(err) != client.CodeNotFound {
		t.Errorf("bob gets alice's session: %v", err)
	}
	if _, err := bob.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"true"}}, nil, nil); apiCode(err) != client.CodeNotFound {
		t.Errorf("bob execs in alice's session: %v", err)
	}
	if err := bob.DeleteSession(ctx, s.ID); apiCode(err) != client.CodeNotFound {
		t.Errorf("bob deletes alice's session: %v", err)
	}
	if list, err := bob.Sessions(ctx); err != nil || len(list) != 0 {
		t.Errorf("bob lists %+v, %v", list, err)
	}
	for _, c := range []*client.Client{client.TCP(d.tcp, ""), client.TCP(d.tcp, "tok-c")} {
		if _, err := c.Sessions(ctx); apiCode(err) != client.CodeUnauthorized {
			t.Errorf("no or a wrong token: %v", err)
		}
	}
	// The scheme's name in any case (RFC 9110), the token as it is.
	for auth, want := range map[string]int{"bearer tok-a": 200, "BEARER tok-a": 200, "bearer TOK-A": 401, "Basic tok-a": 401} {
		req, _ := http.NewRequest("GET", "http://"+d.tcp+"/v1/sessions", nil)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Authorization %q: %d, want %d", auth, resp.StatusCode, want)
		}
	}
	// A token's tenant has no host identity: no host workspace, and no
	// policy beyond the workspace.
	if _, err := alice.CreateSession(ctx, &client.CreateSessionRequest{Workspace: dir}); apiCode(err) != client.CodeWorkspace {
		t.Errorf("a token's tenant names a host workspace: %v", err)
	}
	if _, err := alice.CreateSession(ctx, &client.CreateSessionRequest{Policy: "[filesystem]\nread_write = [\"/var/tmp\"]\n"}); apiCode(err) != client.CodePolicyRefused {
		t.Errorf("a token's tenant widens the policy: %v", err)
	}
	for pol, why := range map[string]string{
		"[network]\nmode = \"host\"\n":           "network.mode",
		"[syscalls]\nprofile = \"unconfined\"\n": "syscalls.profile",
		"[env]\npass = [\"PATH\", \"*\"]\n":      "env.pass",
		"[sandbox]\nrunsc = \"/tmp/x/runsc\"\n":  "sandbox.runsc",
		// runsc maps no ids: the uid would be a host user's.
		"[sandbox]\nisolation = \"gvisor\"\n[user]\nuid = 1001\ngid = 1001\n":                                                                   "user.uid",
		"[network]\nmode = \"allow\"\nallow = [\"example.com\"]\n[[secrets]]\nname = \"T\"\nsource = \"env:HOME\"\nhosts = [\"example.com\"]\n": "[[secrets]]",
	} {
		_, err := alice.CreateSession(ctx, &client.CreateSessionRequest{Policy: pol})
		if apiCode(err) != client.CodePolicyRefused || !strings.Contains(err.Error(), why) {
			t.Errorf("a token's tenant asks for %q: %v", pol, err)
		}
	}
	if _, err := alice.CreateSession(ctx, &client.CreateSessionRequest{Policy: "[filesystem]\nread_only = [\"/usr\", \"/bin\", \"/lib\", \"/etc\"]\n"}); err != nil {
		t.Errorf("a policy within the system directories: %v", err)
	}
	// The control: the native backend maps the sandbox's ids, which any
	// tenant may then choose.
	if _, err := alice.CreateSession(ctx, &client.CreateSessionRequest{Policy: "[user]\nuid = 1001\ngid = 1001\n"}); err != nil {
		t.Errorf("a native session with its own sandbox ids: %v", err)
	}
	if err := alice.DeleteSession(ctx, s.ID); err != nil {
		t.Errorf("alice deletes her session: %v", err)
	}
}

func TestQuotaAndExpiry(t *testing.T) {
	d := startDaemon(t, daemon.Config{MaxSessions: 2, Tick: 50 * time.Millisecond}, nil)
	ctx := context.Background()
	short := d.create(t, &client.CreateSessionRequest{TTL: "2s"})
	idle := d.create(t, &client.CreateSessionRequest{IdleTimeout: "3s"})
	// At once, while both live (a slow machine must not let the TTL free
	// the quota first).
	if _, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{}); apiCode(err) != client.CodeQuota {
		t.Fatalf("third session: %v", err)
	}
	if _, err := d.c.Start(ctx, short.ID, &client.ExecRequest{Args: []string{"sleep", "876545"}}); err != nil {
		t.Fatal(err)
	}
	if len(proctest.Appear(func() []int { return proctest.Find("sleep 876545") }, 10*time.Second)) == 0 {
		t.Fatal("positive control: the background command is not running")
	}
	// A command keeps the idle session alive past its timeout.
	run(t, d.c, idle.ID, &client.ExecRequest{Args: []string{"sleep", "4"}})
	if _, err := d.c.Session(ctx, idle.ID); err != nil {
		t.Errorf("idle session ended while a command ran: %v", err)
	}
	// gone waits (a little, for the daemon's tick) until id has ended,
	// and checks the reason given.
	gone := func(id, why string) error {
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if _, err = d.c.Session(ctx, id); apiCode(err) == client.CodeEnded {
				if !strings.Contains(err.Error(), "("+why+")") {
					return fmt.Errorf("ended, but not said why (%s): %v", why, err)
				}
				return nil
			}
		}
		return fmt.Errorf("still there: %v", err)
	}
	if err := gone(short.ID, "ttl"); err != nil {
		t.Errorf("session past its TTL: %v", err)
	}
	if left := proctest.Gone(func() []int { return proctest.Find("sleep 876545") }, 5*time.Second); len(left) > 0 {
		t.Errorf("a command outlived its session's TTL: %v", left)
	}
	time.Sleep(2 * time.Second)
	if err := gone(idle.ID, "idle"); err != nil {
		t.Errorf("session past its idle timeout: %v", err)
	}
	if _, err := d.c.CreateSession(ctx, &client.CreateSessionRequest{TTL: "1000h"}); apiCode(err) != client.CodeBadRequest {
		t.Errorf("TTL over the maximum: %v", err)
	}
	d.create(t, &client.CreateSessionRequest{}) // the quota is free again
}

func TestClosedConnectionMidStream(t *testing.T) {
	// What the server logs: a client that goes mid-stream is no error of
	// the daemon's, and no second header is written after the stream's.
	// Checked once the server has stopped (cleanups run last first).
	var logs syncBuffer
	t.Cleanup(func() {
		if out := logs.String(); strings.Contains(out, "level=ERROR") || strings.Contains(out, "superfluous") {
			t.Errorf("the server logged a closed connection as a failure:\n%s", out)
		}
	})
	d := startDaemonWith(t, daemon.Config{}, nil, func(s *httpapi.Server) {
		s.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	s := d.create(t, &client.CreateSessionRequest{})
	conn, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	// A writer as fast as it can be (yes | head -1 through the API): the
	// daemon's writes fail at once when the client goes.
	body := `{"args":["yes","x"]}`
	fmt.Fprintf(conn, "POST /v1/sessions/%s/exec HTTP/1.1\r\nHost: moat\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", s.ID, len(body), body)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("exec: %v %v", resp, err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.Contains(line, `"stream":"stdout"`) {
		t.Fatalf("first line %q: %v", line, err)
	}
	conn.Close()
	// The command dies with the request; the daemon serves on.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := d.c.Session(context.Background(), s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command outlived its closed connection")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, _, _ := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"echo", "alive"}}); out != "alive\n" {
		t.Errorf("after a closed stream: %q", out)
	}
}

// TestUIDTenants: on the unix socket a user is its uid; another user sees
// none of root's sessions. It needs root to connect as another uid.
func TestUIDTenants(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("connecting as another uid needs root; the run as root covers it")
	}
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	if s.Tenant != "uid:0" {
		t.Errorf("tenant %q", s.Tenant)
	}
	probe := func(path string) string {
		cmd := exec.Command("curl", "-s", "--unix-socket", d.sock, "http://moat"+path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("curl as uid 65534: %v", err)
		}
		return string(out)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: it is the client run as another uid")
	}
	if got := probe("/v1/sessions/" + s.ID); !strings.Contains(got, `"code":"not_found"`) {
		t.Errorf("uid 65534 gets root's session: %s", got)
	}
	if got := probe("/v1/sessions"); !strings.Contains(got, `"sessions":[]`) {
		t.Errorf("uid 65534 lists: %s", got)
	}
	// Positive control: root's own client sees it.
	if _, err := d.c.Session(context.Background(), s.ID); err != nil {
		t.Error(err)
	}
	// A workspace must be the tenant's own: root's directory is not uid
	// 65534's, and a directory it owns is.
	//
	// The daemon accepts a workspace only below directories no other user
	// can rename; the test's base is a root-owned 0755 directory under
	// /run (not /tmp, whose mode the test does not control).
	base, err := os.MkdirTemp("/run", "moat-uidtest-")
	if err != nil {
		base = t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	own := filepath.Join(base, "own")
	os.Mkdir(own, 0o755)
	os.Chown(own, 65534, 65534)
	body := func(ws string) string { return `{"workspace":"` + ws + `"}` }
	cmd := exec.Command("curl", "-s", "--unix-socket", d.sock, "-d", body(t.TempDir()), "http://moat/v1/sessions")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, _ := cmd.Output(); !strings.Contains(string(out), client.CodeWorkspace) {
		t.Errorf("uid 65534 uses root's directory: %s", out)
	}
	cmd = exec.Command("curl", "-s", "--unix-socket", d.sock, "-d", body(own), "http://moat/v1/sessions")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, _ := cmd.Output(); strings.Contains(string(out), "cannot id-map") {
		// The daemon is root, so the workspace is an idmapped mount, and
		// this kernel cannot id-map the filesystem of the base directory
		// (tmpfs before Linux 6.3): the check above passed, the sandbox
		// could not be made here.
		t.Logf("uid 65534's own directory: the kernel cannot id-map %s's filesystem, so its session cannot start here: %s", base, out)
	} else if !strings.Contains(string(out), `"tenant":"uid:65534"`) {
		var modes []string
		for d := own; d != "/"; d = filepath.Dir(d) {
			if fi, err := os.Lstat(d); err == nil {
				st := fi.Sys().(*syscall.Stat_t)
				modes = append(modes, fmt.Sprintf("%s %v uid %d", d, fi.Mode(), st.Uid))
			}
		}
		t.Errorf("uid 65534 cannot use its own directory: %s\n(the directories above it: %s)", out, strings.Join(modes, "; "))
	}
	// One it could swap for a link after the check (its parent is its
	// own) is refused: the sandbox mounts the workspace by its path.
	nested := filepath.Join(own, "ws")
	os.Mkdir(nested, 0o755)
	os.Chown(nested, 65534, 65534)
	createAs := func(ws string) string {
		cmd := exec.Command("curl", "-s", "--unix-socket", d.sock, "-d", body(ws), "http://moat/v1/sessions")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, _ := cmd.Output()
		return string(out)
	}
	if out := createAs(nested); !strings.Contains(out, "could be renamed or replaced") {
		t.Errorf("uid 65534 uses a workspace under its own directory: %s", out)
	}
	// So is one of its own right in a sticky directory (as in /tmp): it
	// can rename its own entry there, and swap a link to root's in.
	sticky := filepath.Join(base, "sticky")
	os.Mkdir(sticky, 0o777)
	os.Chmod(sticky, 0o777|os.ModeSticky)
	inSticky := filepath.Join(sticky, "ws")
	os.Mkdir(inSticky, 0o755)
	os.Chown(inSticky, 65534, 65534)
	if out := createAs(inSticky); !strings.Contains(out, "could be renamed or replaced") {
		t.Errorf("uid 65534 uses its own directory in a sticky one: %s", out)
	}
}

// TestDaemonKilledMidExec: a daemon killed with SIGKILL while commands run
// leaves no process behind, and the next daemon on its state directory
// reaps its sessions' records and the workspaces it made.
func TestDaemonKilledMidExec(t *testing.T) {
	dir, err := os.MkdirTemp("", "moat-daemon-kill-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	state, sock := filepath.Join(dir, "state"), filepath.Join(dir, "moat.sock")
	cmd, c := daemonProcess(t, state, sock)
	ctx := context.Background()
	var s *client.Session
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		// A memory limit gives the sandbox a cgroup of its own, where the
		// host can make one; the default policy where it cannot.
		if s, err = c.CreateSession(ctx, &client.CreateSessionRequest{Policy: "[limits]\nmemory = \"256MiB\"\n"}); err == nil || apiCode(err) == client.CodeSandboxRefused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon does not answer: %v", err)
		}
	}
	if err != nil {
		t.Logf("no cgroup limit here (%v): the default policy", err)
		if s, err = c.CreateSession(ctx, &client.CreateSessionRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Start(ctx, s.ID, &client.ExecRequest{Args: []string{"sleep", "987654"}}); err != nil {
		t.Fatal(err)
	}
	go c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"sleep", "987655"}}, nil, nil)
	find := func() []int { return append(proctest.Find("sleep 987654"), proctest.Find("sleep 987655")...) }
	for deadline := time.Now().Add(10 * time.Second); len(find()) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the commands did not start: %v", find())
		}
	}
	ws := filepath.Join(state, "daemon", "workspaces", s.ID)
	if _, err := os.Stat(ws); err != nil {
		t.Fatalf("positive control: the session's workspace: %v", err)
	}
	cgroups := ownCgroups(t, find()[0])
	t.Logf("the sandbox's cgroups: %v", cgroups)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if left := proctest.Gone(find, 10*time.Second); len(left) > 0 {
		t.Errorf("processes outlived the daemon: %v", left)
	}

	for _, cg := range cgroups {
		if !fileExists(cg) {
			t.Logf("%s went with the daemon", cg)
		}
	}
	m, err := daemon.New(daemon.Config{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(ctx)
	if len(m.Reaped) != 1 || m.Reaped[0] != s.ID {
		t.Errorf("reaped %v, want [%s]", m.Reaped, s.ID)
	}
	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Errorf("the dead daemon's workspace is left: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "daemon", "sessions")); len(ents) != 0 {
		t.Errorf("session records are left: %v", ents)
	}
	if len(cgroups) > 0 {
		// The session's record names them, and New reclaims them before
		// it returns, however young (no sweep is waited for).
		var left []string
		for _, cg := range cgroups {
			if _, err := os.Stat(cg); err == nil {
				left = append(left, cg)
			}
		}
		if len(left) > 0 {
			t.Errorf("cgroups of the dead daemon's sandbox are left: %v", left)
		}
	} else {
		t.Log("the sandbox had no cgroup of its own here: nothing to reap")
	}
	// A second daemon on the same state directory is refused.
	if _, err := daemon.New(daemon.Config{StateDir: state}); !errors.Is(err, daemon.ErrLocked) {
		t.Errorf("second daemon: %v", err)
	}
}

// TestDaemonKilledCgroupsReaped: the cgroups of a SIGKILLed daemon's
// sessions are named in the sessions' records, and a daemon restarted at
// once removes them, however young, before it stops again at once:
// nothing is left for a later sweep (cgroup.Sweep leaves alone cgroups a
// few seconds old, which a concurrent run may have just made). Where this
// user can have a memory limit, the session is claimed from a warm pool
// that is refilled before the kill, so that a pooled sandbox's record and
// a claimed one's are both checked. The positive control: the recorded
// cgroups hold the session's command while it lives.
func TestDaemonKilledCgroupsReaped(t *testing.T) {
	dir, err := os.MkdirTemp("", "moat-daemon-cgroups-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	state, sock := filepath.Join(dir, "state"), filepath.Join(dir, "moat.sock")
	// A memory limit gives the sandbox a cgroup with controllers; without
	// one, the default policy's sandbox has one without controllers where
	// the daemon is alone in its cgroup v2 (a delegated scope), or none.
	pooled := proctest.ChildHasMemoryLimit()
	var env []string
	if pooled {
		tpl := filepath.Join(dir, "templates")
		os.Mkdir(tpl, 0o700)
		if err := os.WriteFile(filepath.Join(tpl, "mem.toml"), []byte("[limits]\nmemory = \"256MiB\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, "MOAT_TEST_TEMPLATES="+tpl, "MOAT_TEST_POOL=mem=1")
	}
	cmd, c := daemonProcess(t, state, sock, env...)
	ctx := context.Background()
	waitPool := func() { waitPoolReady(t, sock, "mem", 1) }
	var s *client.Session
	if pooled {
		waitPool()
		s, err = c.CreateSession(ctx, &client.CreateSessionRequest{Template: "mem"})
	} else {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if s, err = c.CreateSession(ctx, &client.CreateSessionRequest{}); err == nil || time.Now().After(deadline) {
				break
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, s.ID, &client.ExecRequest{Args: []string{"sleep", "876123"}}); err != nil {
		t.Fatal(err)
	}
	find := func() []int { return proctest.Find("sleep 876123") }
	for deadline := time.Now().Add(10 * time.Second); len(find()) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	var ours []string // this test's cgroups, removed whatever happens
	ours = append(ours, ownCgroups(t, find()[0])...)
	defer func() {
		// Should the test fail before the reap, or the reap fail, this
		// test's cgroups are not left either (empty once the daemon and
		// the sandboxes are dead).
		cmd.Process.Kill()
		cmd.Wait()
		proctest.Gone(find, 10*time.Second)
		for _, d := range ours {
			// The kernel empties a dead sandbox's cgroup in its own time.
			for deadline := time.Now().Add(5 * time.Second); syscall.Rmdir(d) == syscall.EBUSY && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	if pooled {
		waitPool() // refilled: a sandbox made for the pool, not yet claimed
	}
	records := readRecords(t, state)
	for _, dirs := range records {
		ours = append(ours, dirs...)
	}
	if len(records[s.ID]) == 0 {
		if own := ownCgroups(t, find()[0]); len(own) > 0 {
			t.Fatalf("the session's record names no cgroup; its command is in %v", own)
		}
		t.Skip("the sandbox has no cgroup of its own here: nothing to reap")
	}
	var cgroups []string
	for id, dirs := range records {
		t.Logf("session %s's record names the cgroups %v", id, dirs)
		if len(dirs) == 0 {
			t.Errorf("session %s's record names no cgroup", id)
		}
		cgroups = append(cgroups, dirs...)
	}
	if pooled && len(records) != 2 {
		t.Errorf("records of %v, want the claimed session's and the pooled one's", slices.Collect(maps.Keys(records)))
	}
	// The control: the command is in the cgroups its session's record
	// names, and every recorded one is there.
	own := ownCgroups(t, find()[0])
	if len(own) == 0 {
		t.Fatal("control: the command is in no cgroup of its own")
	}
	for _, cg := range own {
		in := false
		for _, d := range records[s.ID] {
			in = in || cg == d || strings.HasPrefix(cg, d+"/")
		}
		if !in {
			t.Errorf("control: the command's cgroup %s is not in the record's %v", cg, records[s.ID])
		}
	}
	var youngest time.Time
	for _, d := range cgroups {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatalf("control: the recorded cgroup: %v", err)
		}
		if fi.ModTime().After(youngest) {
			youngest = fi.ModTime()
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if left := proctest.Gone(find, 10*time.Second); len(left) > 0 {
		t.Errorf("processes outlived the daemon: %v", left)
	}

	m, err := daemon.New(daemon.Config{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	m.Shutdown(ctx)
	stopped := time.Now()
	if len(m.Reaped) != len(records) || !contains(m.Reaped, s.ID) {
		t.Errorf("reaped %v, want the sessions of %d records", m.Reaped, len(records))
	}
	for _, d := range cgroups {
		if fileExists(d) {
			t.Errorf("the dead daemon's cgroup %s is left", d)
		}
	}
	// Any sweep would remove ones old enough: the test would tell nothing
	// of the records.
	if age := stopped.Sub(youngest); age >= 10*time.Second {
		t.Skipf("the youngest cgroup was %s old when the daemon stopped: a sweep could have removed it", age.Round(time.Millisecond))
	}
}

// readRecords reads the cgroups that the session records in the daemon
// state directory state name, by session id.
func readRecords(t *testing.T, state string) map[string][]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(state, "daemon", "sessions", "*.json"))
	out := map[string][]string{}
	for _, f := range files {
		var rec struct {
			ID      string   `json:"id"`
			Cgroups []string `json:"cgroups"`
		}
		data, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(data, &rec)
		}
		if err != nil || rec.ID == "" {
			t.Fatalf("session record %s: %s %v", f, data, err)
		}
		out[rec.ID] = rec.Cgroups
	}
	return out
}

// TestDrain: on shutdown a running command gets the drain bound to end,
// new work is refused meanwhile, and one that outlasts the bound is
// killed with everything else of its session.
func TestDrain(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{})
	if _, err := d.c.Start(ctx, s.ID, &client.ExecRequest{Args: []string{"sleep", "876543"}}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out string
		rep *client.ExitReport
		err error
	}
	short, long, deaf := make(chan result, 1), make(chan result, 1), make(chan result, 1)
	for _, tc := range []struct {
		script string
		ch     chan result
	}{
		{"sleep 1; echo finished", short},
		// Past the bound a command is asked to end (SIGTERM), and one
		// that will not is killed after the grace.
		{"trap 'echo asked to end; exit 3' TERM; echo started; sleep 876544 & wait", long},
		{"trap '' TERM; sleep 876545", deaf},
	} {
		go func() {
			var out strings.Builder
			rep, err := d.c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", tc.script}}, &out, nil)
			tc.ch <- result{out.String(), rep, err}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); len(proctest.Find("sleep 876544")) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the commands did not start")
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.m.Shutdown(sctx) }()
	time.Sleep(200 * time.Millisecond)
	if _, err := d.c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"true"}}, nil, nil); apiCode(err) != client.CodeDraining {
		t.Errorf("exec while draining: %v", err)
	}
	if r := <-short; r.err != nil || r.out != "finished\n" || r.rep.ExitCode != 0 {
		t.Errorf("the command within the bound: %+v", r)
	}
	if r := <-long; r.err != nil || r.rep.ExitCode != 3 || !strings.Contains(r.out, "asked to end") {
		t.Errorf("the command past the bound was not asked to end (SIGTERM): %+v %+v", r, r.rep)
	}
	if r := <-deaf; r.err == nil && r.rep.ExitCode == 0 {
		t.Errorf("the command that ignores SIGTERM was not killed: %+v", r)
	}
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if left := proctest.Gone(func() []int {
		return append(append(proctest.Find("sleep 876543"), proctest.Find("sleep 876544")...), proctest.Find("sleep 876545")...)
	}, 10*time.Second); len(left) > 0 {
		t.Errorf("processes outlived the daemon's shutdown: %v", left)
	}
}

// ownCgroups returns the cgroup directories of process pid that are not
// this test's own: the sandbox's, when it has some.
func ownCgroups(t *testing.T, pid int) []string {
	t.Helper()
	mine, _ := os.ReadFile("/proc/self/cgroup")
	theirs, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(theirs)), "\n") {
		if strings.Contains(string(mine), line+"\n") {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrl := strings.TrimPrefix(parts[1], "name=")
		var dir string
		switch {
		case ctrl == "" && fileExists("/sys/fs/cgroup/unified"):
			dir = filepath.Join("/sys/fs/cgroup/unified", parts[2])
		case ctrl == "":
			dir = filepath.Join("/sys/fs/cgroup", parts[2])
		default:
			dir = filepath.Join("/sys/fs/cgroup", strings.Split(ctrl, ",")[0], parts[2])
		}
		if fileExists(dir) {
			out = append(out, dir)
		}
	}
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// daemonProcess starts this test binary as a daemon (MOAT_TEST_DAEMON)
// on state and sock, with env added to its environment, and a client of
// it; both end with the test.
func daemonProcess(t *testing.T, state, sock string, env ...string) (*exec.Cmd, *client.Client) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "MOAT_TEST_DAEMON="+sock, "MOAT_STATE_DIR="+state), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Before the test's own cleanups: a daemon still there would write
	// into its state directory as they remove it.
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := client.Unix(sock)
	t.Cleanup(func() { c.Close() })
	return cmd, c
}

// waitPoolReady waits until the daemon on sock says n sandboxes of
// template's warm pool are ready.
func waitPoolReady(t *testing.T, sock, template string, n int) {
	t.Helper()
	want := fmt.Sprintf("moat_pool_ready{template=%q} %d", template, n)
	ready := func() bool {
		resp, err := rawClient(sock).Get("http://moat/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(data), want)
	}
	for deadline := time.Now().Add(20 * time.Second); !ready(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool did not fill")
		}
	}
}

// TestExitReportScrubbed: an exec that fails to start in a workspace the
// daemon made names neither in its error nor in its stage the daemon's
// state directory (before, the stage did, tried).
func TestExitReportScrubbed(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	// A directory the command cannot enter: the daemon's check of dir
	// passes it (it exists), the sandbox's chdir fails on it.
	if _, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "mkdir locked && chmod 000 locked"}}); rep == nil || rep.ExitCode != 0 {
		t.Fatalf("mkdir: %+v", rep)
	}
	_, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"true"}, Dir: "locked"})
	if rep == nil || rep.Error == "" {
		t.Fatalf("an exec in a directory it cannot enter: %+v", rep)
	}
	if strings.Contains(rep.Error, d.state) || strings.Contains(rep.Stage, d.state) {
		t.Errorf("the report shows the state directory: error %q, stage %q", rep.Error, rep.Stage)
	}
}

// TestKilledBySessionEnd: a command its session's end kills says why the
// session ended (before, only "killed", tried): its TTL, or a delete.
// The control: a command that ends on its own says nothing of it.
func TestKilledBySessionEnd(t *testing.T) {
	d := startDaemon(t, daemon.Config{Tick: 20 * time.Millisecond}, nil)
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{TTL: "2s"})
	if _, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"true"}}); rep == nil || rep.SessionEnded != "" {
		t.Fatalf("control: %+v", rep)
	}
	if _, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sleep", "30"}}); rep == nil || rep.Reason != "killed" || rep.SessionEnded != "ttl" {
		t.Errorf("a command its session's TTL ended: %+v", rep)
	}
	s = d.create(t, &client.CreateSessionRequest{})
	res := make(chan *client.ExitReport, 1)
	go func() {
		_, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sleep", "30"}})
		res <- rep
	}()
	time.Sleep(500 * time.Millisecond)
	d.c.DeleteSession(ctx, s.ID)
	if rep := <-res; rep == nil || rep.SessionEnded != "deleted" {
		t.Errorf("a command its session's delete ended: %+v", rep)
	}
}

// TestExecDirLeadingOut: an exec whose dir is a link in the workspace
// leading out of it is refused (bad_request), as the API says of paths
// leading out; before, the native backend followed it to the sandbox's
// skeleton and gVisor failed (tried). The control: a link inside works.
func TestExecDirLeadingOut(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	if _, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "mkdir in && ln -s .. up && ln -s /etc etcl && ln -s in inl"}}); rep == nil || rep.ExitCode != 0 {
		t.Fatalf("making the links: %+v", rep)
	}
	for _, dir := range []string{"up", "etcl"} {
		_, err := d.c.Exec(context.Background(), s.ID, &client.ExecRequest{Args: []string{"pwd"}, Dir: dir}, nil, nil)
		if apiCode(err) != client.CodeBadRequest || !strings.Contains(err.Error(), "leads out") {
			t.Errorf("dir %q: %v", dir, err)
		}
	}
	if out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"pwd"}, Dir: "inl"}); rep == nil || rep.ExitCode != 0 || !strings.HasSuffix(strings.TrimSpace(out), "/in") && !strings.HasSuffix(strings.TrimSpace(out), "/inl") {
		t.Errorf("control: dir inl: %q %+v", out, rep)
	}
}
