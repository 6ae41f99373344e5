package mcpserver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/internal/proctest"
	"github.com/moatbox/moat/mcpserver"
)

// The native backend re-executes this test binary as a sandbox's init; the
// stdio tests re-execute it as the server (MOAT_TEST_MCP_STDIO), as moat
// mcp would run, without building moat.
func TestMain(m *testing.M) {
	native.MaybeInit()
	if ws := os.Getenv("MOAT_TEST_MCP_STDIO"); ws != "" {
		os.Exit(serveStdio(ws))
	}
	os.Exit(proctest.RunWithStateDir(m))
}

func serveStdio(ws string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := mcpserver.ServeLocal(ctx, mcpserver.LocalConfig{
		StateDir: os.Getenv("MOAT_STATE_DIR"), Workspace: ws,
		Policy: os.Getenv("MOAT_TEST_MCP_POLICY"), WorkspaceMode: os.Getenv("MOAT_TEST_MCP_MODE"),
	}, mcpserver.NewStdioTransport(os.Stdin, os.Stdout))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// env is a session served over an in-memory transport to the SDK's client.
type env struct {
	m    *daemon.Manager
	ws   string
	sess *daemon.Session
	cs   *mcp.ClientSession
}

type setup struct {
	policy, mode string
	noRestart    bool              // the server cannot restart the session (apply refused)
	files        map[string]string // workspace files made before the session
	// elicit, when set, makes the client offer elicitation and answer
	// every ask with it.
	elicit func(*mcp.ElicitRequest) (*mcp.ElicitResult, error)
	// fetcher, when set, makes the fetch tool's requests.
	fetcher *egress.Fetcher
	// approvals, when set, makes the daemon keep asks nobody else answers
	// as pending approvals, for this long.
	approvals time.Duration
}

// workspaceDir is a new workspace. Not t.TempDir: its parent is private
// to root's tests, and a sandbox user must reach it.
func workspaceDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "moat-mcp-ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func start(t testing.TB, s setup) *env {
	t.Helper()
	state := filepath.Join(os.Getenv("MOAT_STATE_DIR"), "daemon-"+strings.ReplaceAll(t.Name(), "/", "_"))
	m, err := daemon.New(daemon.Config{StateDir: state, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Approvals: s.approvals > 0, ApprovalTimeout: s.approvals, Fetcher: s.fetcher})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		os.RemoveAll(state)
	})
	ws := workspaceDir(t)
	for name, content := range s.files {
		os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644)
	}
	network := &mcpserver.NetworkLog{}
	sess, err := m.Create(context.Background(), daemon.UIDTenant(os.Geteuid()), &daemon.CreateRequest{Policy: s.policy, Workspace: ws, WorkspaceMode: s.mode, NetworkEvents: network.Record})
	if err != nil {
		t.Fatal(err)
	}
	opts := &mcpserver.Options{MaxOutput: 4000, Network: network}
	if !s.noRestart {
		// As ServeLocal does: the session ends and is made again.
		opts.Restart = func(ctx context.Context, between func() error) (*daemon.Session, error) {
			if err := m.Delete(ctx, sess.Tenant, sess.ID); err != nil {
				return nil, err
			}
			berr := between()
			ns, err := m.Create(ctx, sess.Tenant, &daemon.CreateRequest{Policy: s.policy, Workspace: ws, WorkspaceMode: s.mode, NetworkEvents: network.Record})
			if err != nil {
				return nil, err
			}
			return ns, berr
		}
	}
	srv := mcpserver.New(sess, opts)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	var copts mcp.ClientOptions
	if s.elicit != nil {
		copts.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return s.elicit(r) }
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &copts)
	cs, err := c.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return &env{m: m, ws: ws, sess: sess, cs: cs}
}

// call calls a tool and returns its text and whether it is an error
// result; a protocol error fails the test.
func (e *env) call(t testing.TB, tool string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := e.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// ok calls a tool that must succeed, and checks its text holds want.
func (e *env) ok(t testing.TB, tool string, args map[string]any, want ...string) string {
	t.Helper()
	text, isErr := e.call(t, tool, args)
	if isErr {
		t.Fatalf("%s %v: error result: %s", tool, args, text)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("%s %v: result lacks %q:\n%s", tool, args, w, text)
		}
	}
	return text
}

// fails calls a tool that must give an error result saying want.
func (e *env) fails(t testing.TB, tool string, args map[string]any, want ...string) string {
	t.Helper()
	text, isErr := e.call(t, tool, args)
	if !isErr {
		t.Fatalf("%s %v: not an error result: %s", tool, args, text)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("%s %v: error lacks %q:\n%s", tool, args, w, text)
		}
	}
	return text
}

func TestListTools(t *testing.T) {
	e := start(t, setup{})
	res, err := e.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"apply", "diff", "edit_file", "fetch", "list_files", "read_file", "read_output", "run_command", "search_files", "session_info", "start_process", "stop_process", "write_file"}
	var got []string
	for _, tool := range res.Tools {
		got = append(got, tool.Name)
		if len(tool.Description) < 60 {
			t.Errorf("%s: description too short for a model: %q", tool.Name, tool.Description)
		}
		schema, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(schema), `"type":"object"`) {
			t.Errorf("%s: input schema is not an object: %s", tool.Name, schema)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("tools = %v, want %v", got, want)
	}
}

func TestRunCommand(t *testing.T) {
	e := start(t, setup{})
	os.WriteFile(filepath.Join(e.ws, "in.txt"), []byte("from the host\n"), 0o644)
	e.ok(t, "run_command", map[string]any{"command": "cat in.txt; echo oops >&2; exit 3"}, "exit code: 3", "from the host", "--- stderr ---\noops")
	e.ok(t, "run_command", map[string]any{"args": []string{"echo", "a b", "$HOME"}}, "exit code: 0", "a b $HOME")
	os.Mkdir(filepath.Join(e.ws, "sub"), 0o755)
	e.ok(t, "run_command", map[string]any{"command": "pwd", "cwd": "sub"}, e.ws+"/sub")

	// The sandbox is in force: the host's root is not writable.
	e.ok(t, "run_command", map[string]any{"command": "touch /etc/moat-mcp-probe"}, "exit code: 1")
	if _, err := os.Stat("/etc/moat-mcp-probe"); err == nil {
		os.Remove("/etc/moat-mcp-probe")
		t.Fatal("a command wrote /etc")
	}
	// Positive control: the workspace is.
	e.ok(t, "run_command", map[string]any{"command": "touch made-here"}, "exit code: 0")
	if _, err := os.Stat(filepath.Join(e.ws, "made-here")); err != nil {
		t.Fatal(err)
	}

	// Long output keeps its head and tail, with a note.
	text := e.ok(t, "run_command", map[string]any{"command": "seq 1 100000"}, "exit code: 0", "bytes of output left out", "\n1\n", "100000")
	if len(text) > 6000 {
		t.Errorf("output of %d bytes, want it truncated near 4000", len(text))
	}
	// A limit that ends the command is an error result naming it.
	e.fails(t, "run_command", map[string]any{"command": "sleep 30", "timeout_seconds": 1}, "ended by: timeout")
}

func TestBadInput(t *testing.T) {
	e := start(t, setup{})
	e.fails(t, "no_such_tool", map[string]any{}, `unknown tool "no_such_tool"`, "run_command")
	e.fails(t, "run_command", map[string]any{"command": 42}, "command")
	e.fails(t, "run_command", map[string]any{"command": "true", "timeout_seconds": "soon"}, "timeout_seconds")
	e.fails(t, "read_file", map[string]any{"path": "x", "offset": -3}, "must not be negative")
	// In nanoseconds this wraps round to a quarter of a second.
	e.fails(t, "run_command", map[string]any{"command": "true", "timeout_seconds": int64(18446744074)}, "timeout_seconds must be at most")
	e.fails(t, "run_command", map[string]any{}, "give command")
	e.fails(t, "run_command", map[string]any{"command": "true", "args": []string{"true"}}, "not both")
	e.fails(t, "run_command", map[string]any{"command": "true", "cwd": "../.."}, "path escapes the workspace")
	// A directory that is not there is named as such, not as the command.
	text := e.fails(t, "run_command", map[string]any{"command": "true", "cwd": "nonexist"}, `"nonexist" does not exist in the workspace`)
	if strings.Contains(text, "command not found") {
		t.Errorf("a missing directory reads as a missing command: %s", text)
	}
	os.WriteFile(filepath.Join(e.ws, "plain"), nil, 0o644)
	e.fails(t, "run_command", map[string]any{"command": "true", "cwd": "plain"}, `"plain" is a file, not a directory`)
	// Through a link too (the sandbox's chdir said it, naming the
	// daemon's path to the workspace).
	os.Symlink("plain", filepath.Join(e.ws, "lplain"))
	e.fails(t, "run_command", map[string]any{"command": "true", "cwd": "lplain"}, `"lplain" is a file, not a directory`)
	e.fails(t, "read_file", map[string]any{}, "path")
	e.fails(t, "read_output", map[string]any{"id": "99"}, `no background process "99"`)
	// Arguments that are no object are told so in JSON's words, not Go's
	// ("into Go value of type map[string]interface {}", before).
	for args, kind := range map[any]string{"x": "a string", 5: "a number", true: "true or false"} {
		res, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: args})
		if err != nil {
			t.Fatalf("arguments %v: protocol error: %v", args, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError || !strings.Contains(text, "an object of named arguments, not "+kind) || strings.Contains(text, "Go ") {
			t.Errorf("arguments %v: %v %q", args, res.IsError, text)
		}
	}
	// The server keeps serving after all of that.
	e.ok(t, "run_command", map[string]any{"command": "true"}, "exit code: 0")
}

func TestFiles(t *testing.T) {
	for _, mode := range []string{"direct", "overlay"} {
		t.Run(mode, func(t *testing.T) {
			e := start(t, setup{mode: mode})
			host := filepath.Join(e.ws, "dir", "f.txt")
			e.ok(t, "write_file", map[string]any{"path": "dir/f.txt", "content": "one\ntwo\nthree\ntwo\n"}, "wrote dir/f.txt")
			e.ok(t, "read_file", map[string]any{"path": "dir/f.txt"}, "     1\tone\n", "     4\ttwo\n")
			e.ok(t, "read_file", map[string]any{"path": e.ws + "/dir/f.txt", "offset": 2, "limit": 1}, "     2\ttwo\n")
			e.fails(t, "edit_file", map[string]any{"path": "dir/f.txt", "old_string": "four", "new_string": "4"}, "not found")
			e.fails(t, "edit_file", map[string]any{"path": "dir/f.txt", "old_string": "two", "new_string": "2"}, "occurs 2 times")
			e.ok(t, "edit_file", map[string]any{"path": "dir/f.txt", "old_string": "three", "new_string": "3"}, "replaced 1")
			e.ok(t, "edit_file", map[string]any{"path": "dir/f.txt", "old_string": "two", "new_string": "2", "replace_all": true}, "replaced 2")
			e.ok(t, "read_file", map[string]any{"path": "dir/f.txt"}, "one\n", "\t2\n", "\t3\n")
			// What read_file refuses as binary, edit_file refuses to change
			// (it replaced bytes in it before); the file stays as it was.
			e.ok(t, "run_command", map[string]any{"command": "printf 'ab\\000cd' > bin"}, "exit code: 0")
			e.fails(t, "read_file", map[string]any{"path": "bin"}, "not a text file")
			e.fails(t, "edit_file", map[string]any{"path": "bin", "old_string": "cd", "new_string": "xy"}, "not a text file", "nothing changed")
			e.ok(t, "run_command", map[string]any{"command": "od -c bin"}, "a   b  \\0   c   d")
			// Commands see what the tools wrote, whatever the mode.
			e.ok(t, "run_command", map[string]any{"command": "cat dir/f.txt"}, "one\n2\n3\n2\n")
			e.ok(t, "list_files", map[string]any{}, "dir/")
			e.ok(t, "list_files", map[string]any{"recursive": true}, "dir/f.txt (")
			e.ok(t, "search_files", map[string]any{"pattern": "^[0-9]$"}, "dir/f.txt:2:2", "dir/f.txt:3:3")
			e.ok(t, "search_files", map[string]any{"pattern": "absent"}, "no matches")
			// A match on a line of a megabyte comes back as its start and
			// end, as run_command's output does (it was held whole).
			e.ok(t, "run_command", map[string]any{"command": "head -c 1000000 /dev/zero | tr '\\0' a > big.txt"}, "exit code: 0")
			e.ok(t, "search_files", map[string]any{"pattern": "a", "path": "big.txt"}, "bytes of output left out")
			e.ok(t, "run_command", map[string]any{"command": "rm big.txt"}, "exit code: 0")
			e.fails(t, "read_file", map[string]any{"path": "nope.txt"}, "no such file")

			// Paths out of the workspace, by name and by link.
			e.fails(t, "read_file", map[string]any{"path": "../../etc/passwd"}, "path escapes the workspace")
			e.fails(t, "read_file", map[string]any{"path": "/etc/passwd"}, "path escapes the workspace")
			e.fails(t, "write_file", map[string]any{"path": "/tmp/x", "content": "x"}, "path escapes the workspace")
			if err := os.Symlink("/etc", filepath.Join(e.ws, "out")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("dir/f.txt", filepath.Join(e.ws, "in")); err != nil {
				t.Fatal(err)
			}
			e.fails(t, "read_file", map[string]any{"path": "out/passwd"}, "escapes the workspace")
			e.fails(t, "write_file", map[string]any{"path": "out/moat-mcp-probe", "content": "x"}, "escapes the workspace")
			// Positive control: a link within the workspace is followed.
			e.ok(t, "read_file", map[string]any{"path": "in"}, "one\n")
			// A write through a link changes its target and keeps the link,
			// in every mode; one through a link leading out is refused.
			e.ok(t, "edit_file", map[string]any{"path": "in", "old_string": "one", "new_string": "uno"}, "replaced 1")
			e.ok(t, "read_file", map[string]any{"path": "dir/f.txt"}, "uno\n")
			e.ok(t, "edit_file", map[string]any{"path": "in", "old_string": "uno", "new_string": "one"}, "replaced 1")
			e.ok(t, "run_command", map[string]any{"command": "test -L in && readlink in"}, "dir/f.txt")
			if err := os.Symlink("/etc/hostname", filepath.Join(e.ws, "esc")); err != nil {
				t.Fatal(err)
			}
			e.fails(t, "write_file", map[string]any{"path": "esc", "content": "x"}, "escapes the workspace")
			e.ok(t, "run_command", map[string]any{"command": "test -L esc && echo still a link"}, "still a link")
			// search_files holds its path to the workspace, links followed.
			e.fails(t, "search_files", map[string]any{"pattern": "root", "path": "out"}, "escapes the workspace")
			e.fails(t, "search_files", map[string]any{"pattern": "x", "path": "esc"}, "escapes the workspace")
			e.ok(t, "search_files", map[string]any{"pattern": "^one$", "path": "in"}, "one")
			// A file grep cannot read does not hide the others' matches.
			locked := filepath.Join(e.ws, "locked.txt")
			os.WriteFile(locked, []byte("one more\n"), 0o000)
			if os.Geteuid() == 0 {
				os.Chown(locked, 12345, 12345)
			}
			e.ok(t, "search_files", map[string]any{"pattern": "^one"}, "dir/f.txt:1:one", "grep could not read them: locked.txt")
			e.ok(t, "search_files", map[string]any{"pattern": "absent"}, "no matches in the files grep could read")
			e.fails(t, "search_files", map[string]any{"pattern": "(unclosed"}, "search failed")
			os.Remove(locked)
			// One long line is cut in what read_file returns.
			e.ok(t, "write_file", map[string]any{"path": "min.js", "content": strings.Repeat("x", 100000) + "\nend\n"}, "wrote")
			text := e.ok(t, "read_file", map[string]any{"path": "min.js"}, "more bytes of line 1 left out", "     2\tend\n")
			if len(text) > 10000 {
				t.Errorf("read_file returned %d bytes of one long line", len(text))
			}
			if mode == "direct" {
				if fi, err := os.Lstat(filepath.Join(e.ws, "in")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("the link was replaced: %v, %v", fi, err)
				}
			}
			// A link to nothing and a FIFO are refused in every mode (the
			// overlay's helper made what the link named; found by a
			// tester), and stay as they were.
			e.ok(t, "run_command", map[string]any{"command": "ln -s nowhere.txt dangling && mkfifo fifo"}, "exit code: 0")
			e.fails(t, "write_file", map[string]any{"path": "dangling", "content": "x"}, "a link to a file that does not exist")
			e.fails(t, "write_file", map[string]any{"path": "fifo", "content": "x"}, "not a regular file")
			e.ok(t, "run_command", map[string]any{"command": "test -L dangling && test ! -e nowhere.txt && test -p fifo && echo unchanged; rm dangling fifo"}, "unchanged")

			b, err := os.ReadFile(host)
			switch mode {
			case "direct":
				if string(b) != "one\n2\n3\n2\n" {
					t.Errorf("host file = %q, %v", b, err)
				}
			case "overlay":
				if err == nil {
					t.Errorf("an overlay write reached the host: %q", b)
				}
			}
		})
	}
}

func TestProtectedPath(t *testing.T) {
	e := start(t, setup{})
	os.MkdirAll(filepath.Join(e.ws, ".git", "hooks"), 0o755)
	text := e.fails(t, "write_file", map[string]any{"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}, "protected", "so the sandbox may not write it")
	if n := strings.Count(text, "host tools run or read it"); n != 1 {
		t.Errorf("the reason is given %d times: %q", n, text)
	}
	e.ok(t, "write_file", map[string]any{"path": "src/ok.sh", "content": "#!/bin/sh\n"}, "wrote")
}

func TestBackgroundProcess(t *testing.T) {
	e := start(t, setup{})
	// A number no other test sleeps for: the search below is host-wide.
	text := e.ok(t, "start_process", map[string]any{"command": "echo ready; sleep 3017"}, "started process ")
	id := strings.Fields(strings.TrimPrefix(text, "started process "))[0]
	id = strings.TrimSuffix(id, ":")
	e.ok(t, "read_output", map[string]any{"id": id, "wait_seconds": 10}, "is running", "ready")
	e.ok(t, "read_output", map[string]any{"id": id}, "is running", "(no new output)")
	e.ok(t, "stop_process", map[string]any{"id": id}, "has ended", "SIGTERM")
	// The process group's other processes die with it, a moment after.
	if left := proctest.Gone(func() []int { return proctest.Find("sleep 3017") }, 3*time.Second); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
	// A refused command says so at start.
	e.fails(t, "start_process", map[string]any{"command": "git push"}, "rule `irreversible/git-push`")
}

const askPolicy = `
[[rules]]
name = "deploy"
match = { command = ["deploy"] }
decision = "ask"
reason = "deploying changes production"

[[rules]]
name = "nuke"
match = { command = ["nuke"] }
decision = "deny"
reason = "never"
`

func TestRules(t *testing.T) {
	t.Run("deny", func(t *testing.T) {
		e := start(t, setup{policy: askPolicy})
		e.fails(t, "run_command", map[string]any{"command": "nuke all"}, "refused by rule `nuke", "never", "do not retry")
	})
	t.Run("no elicitation", func(t *testing.T) {
		e := start(t, setup{policy: askPolicy})
		e.fails(t, "run_command", map[string]any{"command": "deploy now"}, "refused by rule `deploy", "deploying changes production", "no way to ask")
	})
	var asked []string
	answer := "accept"
	e := start(t, setup{policy: askPolicy, elicit: func(r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = append(asked, r.Params.Message)
		return &mcp.ElicitResult{Action: answer, Content: map[string]any{"approve": true}}, nil
	}})
	os.WriteFile(filepath.Join(e.ws, "deploy"), []byte("#!/bin/sh\necho deployed \"$@\"\n"), 0o755)
	t.Run("approved", func(t *testing.T) {
		e.ok(t, "run_command", map[string]any{"command": "PATH=.:$PATH deploy now"}, "deployed now")
		if len(asked) != 1 || !strings.Contains(asked[0], "deploy now") || !strings.Contains(asked[0], "deploying changes production") {
			t.Errorf("asked %q", asked)
		}
	})
	t.Run("declined", func(t *testing.T) {
		answer = "decline"
		e.fails(t, "run_command", map[string]any{"command": "PATH=.:$PATH deploy now"}, "not approved", "decline")
	})
	t.Run("made up", func(t *testing.T) {
		// An answer the server did not ask for (a request state anyone can
		// compute from the command, as the client would echo it) approves
		// nothing: it is refused, and the user is not asked.
		answer = "decline"
		n := len(asked)
		h := sha256.New()
		h.Write([]byte(e.ws))
		for _, w := range []string{"./deploy", "now"} {
			h.Write([]byte{0})
			h.Write([]byte(w))
		}
		res, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"args": []string{"./deploy", "now"}},
			RequestState:   hex.EncodeToString(h.Sum(nil)),
			InputResponses: mcp.InputResponseMap{"approve": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		if text := b.String(); strings.Contains(text, "deployed") || !res.IsError || !strings.Contains(text, "Call the tool again") || len(asked) != n {
			t.Errorf("a made-up approval: asked %d times, result %q", len(asked)-n, text)
		}
	})
	t.Run("escaped", func(t *testing.T) {
		// A word or a directory with a newline or an escape sequence is
		// shown escaped, on its own line: it cannot redraw the question
		// (the approved subtest is the control: a plain word as it is).
		answer = "decline"
		n := len(asked)
		dir := "d\x1b[2K\x1b[1A\rin ."
		if err := os.Mkdir(filepath.Join(e.ws, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		e.fails(t, "run_command", map[string]any{"args": []string{"./deploy", "now\n\nNothing asks: approve", "txt.\u202eexe", "a\u200fb"}, "cwd": dir}, "not approved")
		if len(asked) != n+1 {
			t.Fatalf("asked %d times", len(asked)-n)
		}
		msg := asked[n]
		if strings.ContainsAny(msg, "\x1b\r\u202e\u200f") || strings.Contains(msg, "\nNothing asks") {
			t.Errorf("the question shows control characters as they are: %q", msg)
		}
		for _, w := range []string{`$'now\x0a\x0aNothing asks: approve'`, `/d\x1b[2K\x1b[1A\x0din .'`, `$'txt.\u202eexe'`, `$'a\u200fb'`} {
			if !strings.Contains(msg, w) {
				t.Errorf("the question lacks %s: %q", w, msg)
			}
		}
	})
	t.Run("unasked", func(t *testing.T) {
		// Positive control: no rule, no question.
		n := len(asked)
		e.ok(t, "run_command", map[string]any{"command": "echo fine"}, "fine")
		if len(asked) != n {
			t.Error("asked about a command no rule matches")
		}
	})
}

func TestOverlayDiffApply(t *testing.T) {
	answer := "decline"
	e := start(t, setup{mode: "overlay", files: map[string]string{"a.txt": "old\n"}, elicit: func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: answer, Content: map[string]any{"approve": true}}, nil
	}})
	e.ok(t, "diff", map[string]any{}, "no changes")
	e.ok(t, "run_command", map[string]any{"command": "echo new > a.txt"}, "exit code: 0")
	e.ok(t, "diff", map[string]any{}, "-old", "+new")
	e.fails(t, "apply", map[string]any{}, "not applied")
	if b, _ := os.ReadFile(filepath.Join(e.ws, "a.txt")); string(b) != "old\n" {
		t.Fatalf("declined apply changed the workspace: %q", b)
	}
	answer = "accept"
	// Commands still running would die with the sandbox: apply waits.
	text := e.ok(t, "start_process", map[string]any{"command": "sleep 300"})
	id := strings.TrimSuffix(strings.Fields(strings.TrimPrefix(text, "started process "))[0], ":")
	e.fails(t, "apply", map[string]any{}, "still run in this session")
	e.ok(t, "stop_process", map[string]any{"id": id}, "has ended")

	e.ok(t, "apply", map[string]any{}, "applied 1 change", "restarted")
	if b, _ := os.ReadFile(filepath.Join(e.ws, "a.txt")); string(b) != "new\n" {
		t.Fatalf("after apply a.txt = %q", b)
	}
	// The session goes on over the applied workspace.
	e.ok(t, "run_command", map[string]any{"command": "cat a.txt; echo newer > a.txt"}, "new")
	e.ok(t, "diff", map[string]any{}, "-new", "+newer")
	if b, _ := os.ReadFile(filepath.Join(e.ws, "a.txt")); string(b) != "new\n" {
		t.Fatalf("a write after apply reached the workspace: %q", b)
	}
}

// TestApplyWithoutRestart: a server that cannot end the session's
// sandbox (the daemon's /mcp) refuses apply at once, without asking a
// person (the question was asked, and the approval recorded, for an apply
// that could not happen, found by a tester).
func TestApplyWithoutRestart(t *testing.T) {
	var asked atomic.Int32
	e := start(t, setup{mode: "overlay", noRestart: true, elicit: func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}})
	e.ok(t, "write_file", map[string]any{"path": "a.txt", "content": "new\n"})
	e.fails(t, "apply", map[string]any{}, "sandbox to end first", "moat apply "+e.sess.ChangeSet())
	if n := asked.Load(); n != 0 {
		t.Errorf("a person was asked %d times about an apply that cannot happen", n)
	}
}

func TestDiffDirect(t *testing.T) {
	e := start(t, setup{})
	e.fails(t, "diff", map[string]any{}, "workspace mode is direct")
	e.fails(t, "apply", map[string]any{}, "workspace mode is direct")
}

func TestApplyNeedsAPerson(t *testing.T) {
	e := start(t, setup{mode: "overlay", files: map[string]string{"a.txt": "old\n"}})
	e.ok(t, "write_file", map[string]any{"path": "a.txt", "content": "new\n"})
	e.fails(t, "apply", map[string]any{}, "needs a person's approval", "moat apply "+e.sess.ChangeSet())
	if b, _ := os.ReadFile(filepath.Join(e.ws, "a.txt")); string(b) != "old\n" {
		t.Fatalf("apply without approval changed the workspace: %q", b)
	}
}

// TestSessionInfo: session_info tells the agent what its session allows:
// the workspace, the network with its lists, the rules in force (the
// built-in sets too), and each secret's variable and hosts, never the
// secret's source or value.
func TestSessionInfo(t *testing.T) {
	t.Setenv("MOAT_TEST_INFO_TOKEN", "real-value-8d1f")
	e := start(t, setup{policy: "[network]\nmode = \"allow\"\nallow = [\"example.org\"]\nallow_cidrs = [\"10.1.2.0/24\"]\n[limits]\nwall = \"7m\"\n" +
		"[[secrets]]\nname = \"API_TOKEN\"\nsource = \"env:MOAT_TEST_INFO_TOKEN\"\nhosts = [\"example.org\"]\n", mode: "overlay"})
	text := e.ok(t, "session_info", map[string]any{}, e.ws, `"workspace_mode": "overlay"`, "example.org", "change set",
		"10.1.2.0/24", `"builtin_rules": [`, "irreversible", `"env": "API_TOKEN"`, "send $API_TOKEN")
	for _, leak := range []string{"real-value-8d1f", "MOAT_TEST_INFO_TOKEN"} {
		if strings.Contains(text, leak) {
			t.Errorf("session_info shows a secret's %q:\n%s", leak, text)
		}
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(text), &info); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, text)
	}
	// The protected paths are those the session refuses, the built-in
	// ones included (it showed only the policy's, [], found by a tester).
	protected, _ := info["protected"].([]any)
	for _, want := range []string{".git/config", ".envrc", ".mcp.json"} {
		if !slices.Contains(protected, any(want)) {
			t.Errorf("session_info's protected %v lacks %s", protected, want)
		}
	}
}

func TestNetworkRefusal(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: it is the command that tries the network")
	}
	e := start(t, setup{policy: "[network]\nmode = \"allow\"\nallow = [\"pypi.org\", \"nothing.invalid\"]\n"})
	e.ok(t, "run_command", map[string]any{"command": "curl -sS -m 10 -o /dev/null http://example.com/"}, "network: example.com:80 is not in the allow list")
	// An allowed destination that cannot be reached is named with why:
	// curl shows only the tunnel's 502.
	e.ok(t, "run_command", map[string]any{"command": "curl -sS -m 30 -o /dev/null https://nothing.invalid/"}, "network: could not reach nothing.invalid:443 (allowed): resolve nothing.invalid")
}

// stdioClient starts this test binary as a stdio server over ws.
func stdioClient(t testing.TB, ws string) *mcp.ClientSession {
	t.Helper()
	cs, _ := stdioServer(t, ws)
	return cs
}

// stdioServer is stdioClient with the server's process.
func stdioServer(t testing.TB, ws string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := serverCmd(t, ws)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs, cmd
}

func TestStdio(t *testing.T) {
	ws := workspaceDir(t)
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("over stdio\n"), 0o644)
	cs := stdioClient(t, ws)
	e := &env{ws: ws, cs: cs}
	e.ok(t, "run_command", map[string]any{"command": "cat f.txt"}, "over stdio")
	e.ok(t, "read_file", map[string]any{"path": "f.txt"}, "over stdio")
	e.fails(t, "nope", map[string]any{}, "unknown tool")
	e.ok(t, "start_process", map[string]any{"command": "sleep 987321"})
	// Disconnecting ends the session: nothing of it is left.
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if left := proctest.Gone(func() []int { return proctest.Find("sleep 987321") }, 10*time.Second); len(left) > 0 {
		t.Errorf("processes left after the client went: %v", left)
	}
	if ents, _ := os.ReadDir(filepath.Join(os.Getenv("MOAT_STATE_DIR"), "mcp")); len(ents) > 0 {
		t.Errorf("state left after the client went: %v", ents)
	}
}

// TestKilledServerIsReaped: a stdio server killed outright (SIGKILL, the
// way an MCP client often ends a server) cannot end its session; the next
// server reaps what it left: its state directory, its sandbox's cgroup
// (however young), and a write of the files API that the kill cut short
// in the workspace. The controls: all are there after the kill, the
// sandbox's processes died with the server, and a live server's
// directory stays while it serves.
func TestKilledServerIsReaped(t *testing.T) {
	base := filepath.Join(os.Getenv("MOAT_STATE_DIR"), "mcp")
	sessionDirs := func() []string {
		dirs, _ := filepath.Glob(filepath.Join(base, "session-*"))
		return dirs
	}
	ws := workspaceDir(t)
	if proctest.ChildHasMemoryLimit() {
		// A cgroup with a controller, where this user can make one.
		t.Setenv("MOAT_TEST_MCP_POLICY", "[limits]\nmemory = \"256MiB\"\n")
	}
	cs, cmd := stdioServer(t, ws)
	e := &env{ws: ws, cs: cs}
	e.ok(t, "start_process", map[string]any{"command": "sleep 987322"})
	killed := sessionDirs()
	if len(killed) != 1 {
		t.Fatalf("control: the server's session directories: %v, want one", killed)
	}
	// The cgroups its session's record names, which the next server
	// removes however young they are.
	cgroups := recordedCgroups(t, killed[0])
	defer func() {
		// Should the reap fail, this test's own are not left either.
		for _, d := range cgroups {
			syscall.Rmdir(d)
		}
	}()
	for _, d := range cgroups {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("control: the recorded cgroup: %v", err)
		}
	}
	if len(cgroups) == 0 {
		t.Log("the sandbox has no cgroup of its own here")
	}
	cmd.Process.Kill()
	cmd.Wait()
	cs.Close()
	if left := proctest.Gone(func() []int { return proctest.Find("sleep 987322") }, 10*time.Second); len(left) > 0 {
		t.Errorf("processes outlived the killed server: %v", left)
	}
	if _, err := os.Stat(killed[0]); err != nil {
		t.Fatalf("control: the killed server's directory is not there to reap: %v", err)
	}
	// What a write_file the kill interrupted leaves at the workspace's root.
	cut := filepath.Join(ws, ".moat-write-0123456789abcdef")
	if err := os.WriteFile(cut, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}

	cs2, _ := stdioServer(t, workspaceDir(t))
	defer cs2.Close()
	(&env{cs: cs2}).ok(t, "run_command", map[string]any{"command": "true"}, "exit code: 0")
	if _, err := os.Stat(killed[0]); !os.IsNotExist(err) {
		t.Errorf("the killed server's directory is still there (%v)", err)
	}
	if _, err := os.Lstat(cut); !os.IsNotExist(err) {
		t.Errorf("the write cut short is still in the workspace (%v)", err)
	}
	for _, d := range cgroups {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("the killed server's cgroup %s is still there (%v)", d, err)
		}
	}
	if live := sessionDirs(); len(live) != 1 || live[0] == killed[0] {
		t.Errorf("control: the live server's session directories: %v, want its own", live)
	}
}

// recordedCgroups reads the cgroups that the session records of the
// local server whose session directory is dir name.
func recordedCgroups(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "daemon", "sessions", "*.json"))
	if len(files) == 0 {
		t.Fatalf("control: no session record in %s", dir)
	}
	var dirs []string
	for _, f := range files {
		var rec struct {
			Cgroups []string `json:"cgroups"`
		}
		data, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(data, &rec)
		}
		if err != nil {
			t.Fatalf("session record %s: %v", f, err)
		}
		dirs = append(dirs, rec.Cgroups...)
	}
	return dirs
}

// The round trip of run_command `true`, against the session's own exec.
func BenchmarkRunTrue(b *testing.B) {
	b.Run("session-exec", func(b *testing.B) {
		e := start(b, setup{})
		for b.Loop() {
			rep, err := e.sess.Exec(context.Background(), &daemon.ExecRequest{Args: []string{"true"}}, backendStdio())
			if err != nil || rep.ExitCode != 0 {
				b.Fatal(err)
			}
		}
	})
	b.Run("in-memory", func(b *testing.B) {
		e := start(b, setup{})
		for b.Loop() {
			e.ok(b, "run_command", map[string]any{"args": []string{"true"}}, "exit code: 0")
		}
	})
	b.Run("stdio", func(b *testing.B) {
		cs := stdioClient(b, workspaceDir(b))
		defer cs.Close()
		e := &env{cs: cs}
		for b.Loop() {
			e.ok(b, "run_command", map[string]any{"args": []string{"true"}}, "exit code: 0")
		}
	})
}

func backendStdio() backend.Stdio { return backend.Stdio{Stdout: io.Discard, Stderr: io.Discard} }

// The protocol's own cost: a tool that runs nothing.
func BenchmarkSessionInfo(b *testing.B) {
	b.Run("in-memory", func(b *testing.B) {
		e := start(b, setup{})
		for b.Loop() {
			e.ok(b, "session_info", map[string]any{})
		}
	})
	b.Run("stdio", func(b *testing.B) {
		cs := stdioClient(b, workspaceDir(b))
		defer cs.Close()
		e := &env{cs: cs}
		for b.Loop() {
			e.ok(b, "session_info", map[string]any{})
		}
	})
}

// TestTerminatedDuringCommand: SIGTERM ends a stdio server at once even
// while a tool call runs (the SDK would wait for the call to end), and
// its session with it. The control: the command was running when the
// signal came.
func TestTerminatedDuringCommand(t *testing.T) {
	s := launchRaw(t, workspaceDir(t))
	defer s.in.Close()
	go io.Copy(io.Discard, s.out)
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 987323"}}}`)
	done := make(chan error, 1)
	if pids := proctest.Appear(func() []int { return proctest.Find("sleep 987323") }, 20*time.Second); len(pids) == 0 {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		t.Fatal("control: the command did not start")
	}
	start := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the server ended with %v, want 0", err)
		}
		t.Logf("ended %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-done
		t.Fatal("the server did not end on SIGTERM while a command ran")
	}
	if left := proctest.Gone(func() []int { return proctest.Find("sleep 987323") }, 10*time.Second); len(left) > 0 {
		t.Errorf("processes left after SIGTERM: %v", left)
	}
}

// An apply the change set refuses (a protected path, a file changed on
// the host since) is refused before anyone is asked and before the
// restart: the session keeps its layer, its changes and its background
// processes. The positive control: the same apply of the other path
// goes through.
func TestApplyRefusedKeepsSession(t *testing.T) {
	asked := 0
	e := start(t, setup{mode: "overlay", files: map[string]string{"a.txt": "old\n", "b.txt": "b\n"}, elicit: func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked++
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}})
	e.ok(t, "run_command", map[string]any{"command": "echo new > a.txt; echo g > g.txt; echo x > .envrc"}, "exit code: 0")
	e.ok(t, "start_process", map[string]any{"command": "sleep 300"})
	id := e.sess.ChangeSet()
	e.fails(t, "apply", map[string]any{}, "apply refused", ".envrc", "goes on with its changes")
	// A host edit since the session began.
	os.WriteFile(filepath.Join(e.ws, "a.txt"), []byte("host\n"), 0o644)
	e.fails(t, "apply", map[string]any{"paths": []string{"a.txt"}}, "changed on the host", "a.txt")
	if asked != 0 {
		t.Errorf("asked %d times about applies that could not succeed", asked)
	}
	if e.sess.ChangeSet() != id {
		t.Errorf("the session moved from change set %s to %s", id, e.sess.ChangeSet())
	}
	e.ok(t, "run_command", map[string]any{"command": "cat a.txt g.txt"}, "new", "g")
	if st := e.sess.Status(); st.Running == 0 {
		t.Errorf("the background process did not survive: %+v", st)
	}
	// The control: g.txt alone applies (once nothing runs).
	e.ok(t, "run_command", map[string]any{"command": "pkill sleep; true"}, "exit code")
	// The killed process is seen to end a moment later (it failed the
	// apply below under load, as still running).
	for deadline := time.Now().Add(30 * time.Second); e.sess.Status().Running > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the background process did not end: %+v", e.sess.Status())
		}
	}
	// The changes to a.txt and .envrc, not applied, leave the restarted session:
	// the result says where it is kept (it said nothing; found by a
	// tester).
	e.ok(t, "apply", map[string]any{"paths": []string{"g.txt"}}, "applied 1 change", "2 change(s) not applied are no longer in the session", "kept as change set "+id)
	if b, _ := os.ReadFile(filepath.Join(e.ws, "g.txt")); string(b) != "g\n" {
		t.Fatalf("g.txt after apply: %q", b)
	}
}

// TestApplyIsWhatWasShown: what the session writes while the person is
// asked about an apply does not ride along on the answer: the question
// is about the diff as it was (its digest is part of what is asked), so
// the answer to it does not approve another diff, which is asked about
// anew (a file written while the question waited was applied unseen,
// found by a tester). The control: the apply of an unchanged set
// (TestOverlayDiffApply) goes through on one answer.
func TestApplyIsWhatWasShown(t *testing.T) {
	var e *env
	var asked []string
	e = start(t, setup{mode: "overlay", files: map[string]string{"a.txt": "old\n"}, elicit: func(r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = append(asked, r.Params.Message)
		if len(asked) > 1 {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		// The session writes more while the person reads the question.
		rep, err := e.sess.Exec(context.Background(), &daemon.ExecRequest{Args: []string{"sh", "-c", "echo unseen > b.txt"}}, backend.Stdio{})
		if err != nil || rep.ExitCode != 0 {
			t.Errorf("the write during the question: %+v %v", rep, err)
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}})
	e.ok(t, "run_command", map[string]any{"command": "echo new > a.txt"}, "exit code: 0")
	// The answer, to another diff's question, is refused in words the
	// model acts on (a second question in its place reached a client of
	// an older protocol as an empty success; found by a tester); called
	// again, the person is asked about b.txt too.
	e.fails(t, "apply", map[string]any{}, "nothing was done", "Call the tool again")
	if len(asked) != 1 || strings.Contains(asked[0], "b.txt") {
		t.Errorf("asked %d times, want once, not about b.txt: %q", len(asked), asked)
	}
	e.fails(t, "apply", map[string]any{}, "not applied")
	if len(asked) != 2 || !strings.Contains(asked[1], "b.txt") {
		t.Errorf("asked %d times, want twice, the second time about b.txt too: %q", len(asked), asked)
	}
	for name, want := range map[string]string{"a.txt": "old\n", "b.txt": ""} {
		if b, _ := os.ReadFile(filepath.Join(e.ws, name)); string(b) != want {
			t.Errorf("after the refused apply %s = %q, want %q", name, b, want)
		}
	}
}

// TestApplyDigestSeesLargeEdits: a file over the review's read bound is
// in the diff by its sizes alone; an edit of the same size made while
// the person is asked still changes what apply would write, and the
// answer is refused (the digest missed it; found by a reviewer). The
// control: the same apply, nothing written meanwhile, asks once and
// applies (TestOverlayDiffApply).
func TestApplyDigestSeesLargeEdits(t *testing.T) {
	var e *env
	asked := 0
	e = start(t, setup{mode: "overlay", elicit: func(r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked++
		// The same size, other bytes, while the person reads.
		rep, err := e.sess.Exec(context.Background(), &daemon.ExecRequest{Args: []string{"sh", "-c", "printf Z | dd of=big bs=1 seek=1000 conv=notrunc 2>/dev/null"}}, backend.Stdio{})
		if err != nil || rep.ExitCode != 0 {
			t.Errorf("the edit during the question: %+v %v", rep, err)
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}})
	e.ok(t, "run_command", map[string]any{"command": "head -c 34000000 /dev/zero > big"}, "exit code: 0")
	e.fails(t, "apply", map[string]any{}, "nothing was done", "Call the tool again")
	if asked != 1 {
		t.Errorf("asked %d times, want once", asked)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "big")); err == nil {
		t.Error("big was applied")
	}
}

// TestPartialApplyIgnoresOtherChanges: an apply of some paths is about
// those: a change elsewhere made while the person is asked does not
// refuse it (it did, the digest being the whole diff's), nor is it in
// the question; a change to a path applied still refuses it (the
// control).
func TestPartialApplyIgnoresOtherChanges(t *testing.T) {
	for _, tc := range []struct {
		edit    string
		applied bool
	}{{"echo other > b.txt", true}, {"echo newest > a.txt", false}} {
		t.Run(fmt.Sprint(tc.applied), func(t *testing.T) { partialApply(t, tc.edit, tc.applied) })
	}
}

func partialApply(t *testing.T, edit string, applied bool) {
	var e *env
	var asked []string
	e = start(t, setup{mode: "overlay", files: map[string]string{"a.txt": "old\n"}, elicit: func(r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = append(asked, r.Params.Message)
		rep, err := e.sess.Exec(context.Background(), &daemon.ExecRequest{Args: []string{"sh", "-c", edit}}, backend.Stdio{})
		if err != nil || rep.ExitCode != 0 {
			t.Errorf("the write during the question: %+v %v", rep, err)
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}})
	e.ok(t, "run_command", map[string]any{"command": "echo new > a.txt; echo first > c.txt"}, "exit code: 0")
	want := "old\n"
	if applied {
		e.ok(t, "apply", map[string]any{"paths": []string{"a.txt"}}, "applied 1 change")
		want = "new\n"
	} else {
		e.fails(t, "apply", map[string]any{"paths": []string{"a.txt"}}, "nothing was done", "Call the tool again")
	}
	if len(asked) != 1 || strings.Contains(asked[0], "c.txt") || !strings.Contains(asked[0], "a.txt") {
		t.Errorf("%s: asked %q, want once, about a.txt alone", edit, asked)
	}
	if b, _ := os.ReadFile(filepath.Join(e.ws, "a.txt")); string(b) != want {
		t.Errorf("%s: a.txt after the apply: %q, want %q", edit, b, want)
	}
}
