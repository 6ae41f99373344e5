package mcpserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/mcpserver"
)

// rawServer starts this test binary as a stdio server over ws, with its
// stdin and stdout as they are: lines no client would send.
type rawServer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startRaw(t *testing.T, ws string) *rawServer {
	t.Helper()
	return startRawWith(t, ws, "2025-06-18", `{}`)
}

// serverCmd is this test binary as a stdio server over ws (TestMain).
func serverCmd(t testing.TB, ws string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "MOAT_TEST_MCP_STDIO="+ws)
	cmd.Stderr = os.Stderr
	return cmd
}

// launchRaw starts the server with its stdin and stdout as they are,
// uninitialised, for a test that also waits for it to end.
func launchRaw(t *testing.T, ws string) *rawServer {
	t.Helper()
	cmd := serverCmd(t, ws)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &rawServer{cmd: cmd, in: in, out: bufio.NewReader(out)}
}

// startRawWith is startRaw with the client's protocol version and
// capabilities.
func startRawWith(t *testing.T, ws, version, caps string) *rawServer {
	t.Helper()
	s := launchRaw(t, ws)
	cmd, in := s.cmd, s.in
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the server ended with %v", err)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Error("the server did not end with its stdin")
		}
	})
	s.send(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}}`)
	s.answer(t, `"init"`)
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

func (s *rawServer) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		t.Fatalf("writing to the server: %v", err)
	}
}

// answer reads the server's messages up to the answer whose id is the
// JSON id, and returns it.
func (s *rawServer) answer(t *testing.T, id string) map[string]any {
	t.Helper()
	type res struct {
		m   map[string]any
		err error
	}
	c := make(chan res, 1)
	go func() {
		for {
			line, err := s.out.ReadBytes('\n')
			if err != nil {
				c <- res{err: err}
				return
			}
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				c <- res{err: fmt.Errorf("%v: %q", err, line)}
				return
			}
			if got, _ := json.Marshal(m["id"]); string(got) == id {
				c <- res{m: m}
				return
			}
		}
	}()
	select {
	case r := <-c:
		if r.err != nil {
			t.Fatalf("waiting for the answer %s: %v", id, r.err)
		}
		return r.m
	case <-time.After(60 * time.Second):
		t.Fatalf("no answer %s", id)
	}
	return nil
}

// rpcError is the code and message of an error answer; 0 if m is none.
func rpcError(m map[string]any) (int, string) {
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	return int(code), msg
}

// toolText is the text of a tools/call answer, and whether it is an
// error result.
func toolText(t *testing.T, m map[string]any) (string, bool) {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("not a result: %v", m)
	}
	var b strings.Builder
	cs, _ := r["content"].([]any)
	for _, c := range cs {
		if tc, _ := c.(map[string]any); tc["type"] == "text" {
			b.WriteString(tc["text"].(string))
		}
	}
	isErr, _ := r["isError"].(bool)
	return b.String(), isErr
}

// vmHWM is the peak resident memory of process pid, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestStdioBadLines: one line the SDK cannot read (longer than its
// bound, not JSON, not JSON-RPC) ended the connection, and with it the
// session and every command of it. Each is answered with a JSON-RPC
// error now, and the server serves the next; a line over the bound is
// discarded as it is read, and the server's memory stays far below it.
// The positive controls: a command runs after each, in the same session
// (its background process lives through them), and a large message
// within the bound is served.
func TestStdioBadLines(t *testing.T) {
	ws := workspaceDir(t)
	s := startRaw(t, ws)
	call := func(id int, tool string, args map[string]any) (string, bool) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
		s.send(t, string(b))
		return toolText(t, s.answer(t, strconv.Itoa(id)))
	}
	if text, isErr := call(1, "start_process", map[string]any{"command": "sleep 987323"}); isErr {
		t.Fatalf("start_process: %s", text)
	}
	before := vmHWM(t, s.cmd.Process.Pid)

	// Four times the bound, in one line, its id first.
	const big = 4 * mcpserver.MaxMessage
	go func() {
		w := bufio.NewWriterSize(s.in, 1<<20)
		io.WriteString(w, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"huge","content":"`)
		chunk := bytes.Repeat([]byte("a"), 1<<20)
		for n := 0; n < big; n += len(chunk) {
			w.Write(chunk)
		}
		io.WriteString(w, "\"}}}\n")
		w.Flush()
	}()
	m := s.answer(t, "7")
	if code, msg := rpcError(m); code != -32600 || !strings.Contains(msg, "message too large") || !strings.Contains(msg, strconv.Itoa(mcpserver.MaxMessage)) {
		t.Errorf("the answer to a line of %d bytes: %v", big, m)
	}
	after := vmHWM(t, s.cmd.Process.Pid)
	t.Logf("the server's peak resident memory: %d MiB before the line, %d MiB after", before>>20, after>>20)
	if after-before > big/2 {
		t.Errorf("the server's peak resident memory grew by %d MiB for a line of %d MiB", (after-before)>>20, big>>20)
	}
	if text, isErr := call(8, "run_command", map[string]any{"command": "ls; pgrep -x sleep >/dev/null && echo sleeping"}); isErr || strings.Contains(text, "huge") || !strings.Contains(text, "sleeping") {
		t.Errorf("the session after the long line (its background process, no file huge): %s", text)
	}

	for _, tc := range []struct {
		line, id string
		code     int
		want     string
	}{
		{`{"jsonrpc":"2.0","id":9,"method":"tools/call",`, "null", -32700, "parse error"},
		{`{"jsonrpc":"2.0","id":10} {"jsonrpc":"2.0","id":11}`, "null", -32700, "parse error"},
		{`{"jsonrpc":"1.0","id":12,"method":"ping"}`, "12", -32600, "invalid request"},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "null", -32600, "invalid request"},
		{`[]`, "null", -32600, "batches are not supported"},
		{`[{"jsonrpc":"2.0","id":13,"method":"ping"}]`, "null", -32600, "batches are not supported"},
		{"\"text\"", "null", -32600, "invalid request"},
		// Over the bound, its id past what the server keeps of it.
		{`{"jsonrpc":"2.0","method":"ping","params":{"pad":"` + strings.Repeat("p", mcpserver.MaxMessage) + `"},"id":14}`, "null", -32600, "message too large"},
	} {
		s.send(t, tc.line)
		m := s.answer(t, tc.id)
		if code, msg := rpcError(m); code != tc.code || !strings.Contains(msg, tc.want) {
			t.Errorf("the answer to %.80s: %v; want %d %q", tc.line, m, tc.code, tc.want)
		}
		if text, isErr := call(20, "run_command", map[string]any{"command": "echo alive"}); isErr || !strings.Contains(text, "alive") {
			t.Errorf("run_command after %.80s: %s", tc.line, text)
		}
	}

	// Blanks around a message, and blank lines, are no error.
	s.send(t, "")
	s.send(t, `  {"jsonrpc":"2.0","id":30,"method":"ping"}  `+"\r")
	if m := s.answer(t, "30"); m["result"] == nil {
		t.Errorf("ping with blanks around it: %v", m)
	}
	// A message of some MiB, within the bound.
	content := strings.Repeat("b", 4<<20)
	if text, isErr := call(31, "write_file", map[string]any{"path": "large", "content": content}); isErr {
		t.Errorf("write_file of 4 MiB: %s", text)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "large")); string(b) != content {
		t.Errorf("the 4 MiB file holds %d bytes", len(b))
	}
}

// TestAskFailsAsToolResult: a client on a protocol version without
// multi-round-trip results is asked through elicitation/create, which
// the SDK sends for the server; when the client answers it with an error,
// or with content the form does not take, the call is a tool result
// saying so, not a protocol error, and nothing runs. The control: the
// same call answered with an approval runs.
func TestAskFailsAsToolResult(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "deploy"), []byte("#!/bin/sh\necho deployed \"$@\"\n"), 0o755)
	t.Setenv("MOAT_TEST_MCP_POLICY", askPolicy)
	s := startRawWith(t, ws, "2025-06-18", `{"elicitation":{}}`)
	for i, answer := range []string{
		`"error":{"code":-32603,"message":"the client broke"}`,
		`"result":{"action":"accept","content":{"approve":"yes"}}`,
		`"result":{"action":"accept","content":{"approve":true}}`,
	} {
		id := fmt.Sprintf(`"call%d"`, i)
		s.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"PATH=.:$PATH deploy now"}}}`)
		var m map[string]any
		for m == nil {
			line, err := s.out.ReadBytes('\n')
			if err != nil {
				t.Fatal(err)
			}
			var msg map[string]any
			json.Unmarshal(line, &msg)
			switch got, _ := json.Marshal(msg["id"]); {
			case msg["method"] == "elicitation/create":
				s.send(t, `{"jsonrpc":"2.0","id":`+string(got)+`,`+answer+`}`)
			case string(got) == id:
				m = msg
			}
		}
		if code, msg := rpcError(m); code != 0 || msg != "" {
			t.Fatalf("answer %d: a protocol error %d %q, want a tool result", i, code, msg)
		}
		text, isErr := toolText(t, m)
		if i == 2 {
			if isErr || !strings.Contains(text, "deployed now") {
				t.Errorf("control: approved, the command gave %q (error %v)", text, isErr)
			}
			continue
		}
		if !isErr || !strings.Contains(text, "the client's answer failed") || strings.Contains(text, "deployed") {
			t.Errorf("answer %d: %q (error %v), want an error result saying the ask failed", i, text, isErr)
		}
	}
}
