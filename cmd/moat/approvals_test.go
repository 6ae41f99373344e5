//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
)

// TestApprovalCommands: moat exec waits on an ask; moat approvals lists
// it, moat approve lets it run, moat deny refuses the next; the webhook
// hears of each, and the audit stream records who answered.
func TestApprovalCommands(t *testing.T) {
	hooks := make(chan map[string]any, 4)
	wh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev map[string]any
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &ev)
		hooks <- ev
	}))
	defer wh.Close()
	dir := t.TempDir()
	auditFile := filepath.Join(dir, "audit.jsonl")
	sock, _ := startServe(t, "--approval-webhook", wh.URL, "--audit", auditFile, "--approval-timeout", "1m")
	id := policySession(t, dir, sock, "[[rules]]\nname = \"ship\"\nmatch = { command = [\"echo\", \"ship\"] }\ndecision = \"ask\"\nreason = \"it leaves\"\n")
	type result struct {
		code      int
		out, errs string
	}
	exec := func(args ...string) chan result {
		ch := make(chan result, 1)
		go func() {
			code, out, errs := moat(t, dir, append([]string{"exec", "--socket", sock, id, "--"}, args...)...)
			ch <- result{code, out, errs}
		}()
		return ch
	}
	waitID := func() string {
		t.Helper()
		select {
		case ev := <-hooks:
			if ev["event"] != "approval.pending" || ev["rule"] == "" || ev["session"] != id {
				t.Errorf("webhook: %v", ev)
			}
			return ev["id"].(string)
		case <-time.After(30 * time.Second):
			t.Fatal("no webhook")
		}
		return ""
	}

	res := exec("echo", "ship", "it")
	aid := waitID()
	code, out, _ := moat(t, dir, "approvals", "--socket", sock)
	if code != 0 || !strings.Contains(out, aid) || !strings.Contains(out, `["echo" "ship" "it"]`) || !strings.Contains(out, "ship") {
		t.Errorf("moat approvals: %d %q", code, out)
	}
	if code, _, errs := moat(t, dir, "approve", "--socket", sock, "--scope", "prefix", "--prefix", "rm -rf", aid); code != exitMoatError || !strings.Contains(errs, "approval_refused") {
		t.Errorf("approve a prefix not shown: %d %q", code, errs)
	}
	if code, _, errs := moat(t, dir, "approve", "--socket", sock, "--reason", "release", aid); code != 0 {
		t.Fatalf("moat approve: %d %q", code, errs)
	}
	// It said what it waited for, and how to answer (over a unix socket
	// moat exec sends an interactive exec, whose stream told nothing).
	if r := <-res; r.code != 0 || r.out != "ship it\n" || !strings.Contains(r.errs, "waits for a person's approval") || !strings.Contains(r.errs, "moat approve "+aid) {
		t.Errorf("approved exec: %+v", r)
	}
	if code, _, errs := moat(t, dir, "approve", "--socket", sock, aid); code != exitMoatError || !strings.Contains(errs, "moat approve: no such approval") || !strings.Contains(errs, "not_found") {
		t.Errorf("approved twice: %d %q", code, errs)
	}
	for _, cmd := range []string{"approve", "deny"} {
		if code, _, errs := moat(t, dir, cmd, "--socket", sock, "nosuch"); code != exitMoatError || !strings.Contains(errs, `moat `+cmd+`: no such approval "nosuch"`) || strings.Contains(errs, "session") {
			t.Errorf("moat %s of an unknown approval: %d %q", cmd, code, errs)
		}
	}

	res = exec("echo", "ship", "again")
	aid = waitID()
	if code, _, errs := moat(t, dir, "deny", "--socket", sock, "--reason", "not today", aid); code != 0 {
		t.Fatalf("moat deny: %d %q", code, errs)
	}
	if r := <-res; r.code != exitMoatError || r.out != "" || !strings.Contains(r.errs, "ship") || !strings.Contains(r.errs, "not today") {
		t.Errorf("denied exec: %+v", r)
	}
	if code, out, _ := moat(t, dir, "approvals", "--socket", sock); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("nothing waits: %d %q", code, out)
	}
	// An ask shows the directory the command runs in, which a session's
	// command can name: a name with a terminal's control sequences in it
	// is shown escaped (it cleared the screen, and could redraw the
	// list). The control: the same ask's command is listed.
	weird := "dir\x1b[2J\x1b[Hx"
	if code, _, errs := moat(t, dir, "exec", "--socket", sock, id, "--", "mkdir", weird); code != 0 {
		t.Fatalf("mkdir: %d %q", code, errs)
	}
	res = make(chan result, 1)
	go func() {
		code, out, errs := moat(t, dir, "exec", "--socket", sock, "--dir", weird, id, "--", "echo", "ship", "it")
		res <- result{code, out, errs}
	}()
	aid = waitID()
	code, out, _ = moat(t, dir, "approvals", "--socket", sock)
	if code != 0 || !strings.Contains(out, aid) || !strings.Contains(out, `dir\x1b[2J\x1b[Hx`) || strings.Contains(out, "\x1b") {
		t.Errorf("moat approvals with a directory of control sequences: %d %q", code, out)
	}
	moat(t, dir, "deny", "--socket", sock, aid)
	<-res
	// A background command an ask holds is named while it waits, as a
	// foreground one is, and starts once approved.
	res = make(chan result, 1)
	go func() {
		code, out, errs := moat(t, dir, "exec", "--socket", sock, "-d", id, "--", "echo", "ship", "bg")
		res <- result{code, out, errs}
	}()
	aid = waitID()
	time.Sleep(3 * time.Second) // the waiting exec looks twice a second
	moat(t, dir, "approve", "--socket", sock, aid)
	if r := <-res; r.code != 0 || strings.TrimSpace(r.out) == "" || !strings.Contains(r.errs, "waits for a person's approval") || !strings.Contains(r.errs, aid) {
		t.Errorf("exec -d held by an ask: %+v", r)
	}
	if code, _, errs := moat(t, dir, "approvals", "--socket", sock, "--web"); code != exitMoatError || !strings.Contains(errs, "no TCP listener") {
		t.Errorf("--web without a TCP listener: %d %q", code, errs)
	}

	code, out, errs := moat(t, dir, "audit", "verify", auditFile)
	if code != 0 {
		t.Errorf("audit verify: %d %q %q", code, out, errs)
	}
	data, _ := os.ReadFile(auditFile)
	for _, want := range []string{`"type":"approval"`, `"outcome":"approved"`, `"why":"release"`, `"outcome":"denied"`, `"why":"not today"`, `"type":"decision"`, `"approver":"api"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the audit stream lacks %s:\n%s", want, data)
		}
	}
}

// TestMCPApprovalsSocket: moat mcp --approvals-socket keeps an ask its
// client cannot answer (no elicitation) as a pending approval, which
// moat approvals and moat approve answer on that socket.
func TestMCPApprovalsSocket(t *testing.T) {
	ws := t.TempDir()
	sock := filepath.Join(t.TempDir(), "approvals.sock")
	pf := filepath.Join(ws, "p.toml")
	os.WriteFile(pf, []byte("[[rules]]\nname = \"ship\"\nmatch = { command = [\"echo\", \"ship\"] }\ndecision = \"ask\"\nreason = \"it leaves\"\n"), 0o644)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- realMain([]string{"mcp", "--workspace", ws, "--policy", pf, "--approvals-socket", sock}, inR, outW, &errb)
		outW.Close()
	}()
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo ship it"}}}`,
	} {
		io.WriteString(inW, line+"\n")
	}
	answer := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"id":2`) {
				answer <- sc.Text()
				break
			}
		}
		io.Copy(io.Discard, outR)
	}()
	var id string
	for deadline := time.Now().Add(20 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if code, out, _ := moat(t, ws, "approvals", "--socket", sock); code == 0 {
			for _, line := range strings.Split(out, "\n")[1:] {
				if strings.Contains(line, "ship it") {
					id = strings.Fields(line)[0]
				}
			}
		}
	}
	if id == "" {
		t.Fatalf("no pending approval on the socket (stderr %s)", errb.String())
	}
	if code, _, errs := moat(t, ws, "approve", "--socket", sock, id); code != 0 {
		t.Fatalf("moat approve: %d %q", code, errs)
	}
	select {
	case got := <-answer:
		if !strings.Contains(got, "ship it") || strings.Contains(got, `"isError":true`) {
			t.Errorf("run_command answer: %s", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer to run_command")
	}
	inW.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("moat mcp exited %d: %s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("moat mcp did not end with its stdin")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("moat mcp left its approvals socket: %v", err)
	}
}

// TestApprovalAction: a pending approval of a shell line shows the
// simple command that asked, which a prefix approval must begin; a rule
// name is shown escaped.
func TestApprovalAction(t *testing.T) {
	a := client.Approval{Command: []string{"bash", "-c", "touch a1 && echo ok"}, Decided: []string{"touch", "a1"}}
	if got, want := approvalAction(a), `["bash" "-c" "touch a1 && echo ok"] because of ["touch" "a1"]`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	a = client.Approval{Command: []string{"touch", "a1"}, Decided: []string{"touch", "a1"}}
	if got, want := approvalAction(a), `["touch" "a1"]`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
