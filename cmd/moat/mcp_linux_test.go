package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/mcpserver"
)

func TestMCPBadInput(t *testing.T) {
	ws := t.TempDir()
	bad := filepath.Join(ws, "bad.toml")
	os.WriteFile(bad, []byte("[limits]\nwall = \"soon\"\n"), 0o644)
	other := filepath.Join(ws, "other.toml")
	os.Mkdir(filepath.Join(ws, "elsewhere"), 0o755)
	os.WriteFile(other, []byte("[workspace]\npath = \"elsewhere\"\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mcp", "--nope"}, 2, "moat mcp: unknown flag --nope; see moat mcp --help"},
		{[]string{"mcp", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"mcp", "--workspace", filepath.Join(ws, "missing")}, exitMoatError, "does not exist"},
		{[]string{"mcp", "--policy", filepath.Join(ws, "missing.toml")}, exitMoatError, "policy:"},
		{[]string{"mcp", "--policy", bad}, exitMoatError, "wall"},
		{[]string{"mcp", "--workspace-mode", "sideways"}, exitMoatError, "sideways"},
		{[]string{"mcp", "--policy", other, "--workspace", ws}, exitMoatError, `workspace.path "elsewhere" is not the session's workspace`},
	} {
		code, out, errs := moat(t, ws, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("moat %v: code %d, stdout %q, stderr %q; want code %d and %q", tc.args, code, out, errs, tc.code, tc.want)
		}
		if strings.Contains(errs, "goroutine ") {
			t.Errorf("moat %v: a stack trace: %s", tc.args, errs)
		}
	}
}

// TestMCPStdio is moat mcp as a client starts it: requests on stdin,
// answers on stdout, the end of stdin the end of the session. A line
// too long for it ended it, and the session; it is answered now.
func TestMCPStdio(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("from the workspace\n"), 0o644)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- realMain([]string{"mcp", "--workspace", ws}, inR, outW, &errb)
		outW.Close()
	}()
	// A line longer than moat mcp reads is refused, and the next served:
	// the server answers as it reads, so the lines are written apart.
	go func() {
		for _, line := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"` + strings.Repeat("a", mcpserver.MaxMessage) + `"}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"cat f.txt"}}}`,
		} {
			io.WriteString(inW, line+"\n")
		}
	}()
	sc := bufio.NewScanner(outR)
	var got, tooLong string
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"id":3`) {
			tooLong = sc.Text()
		}
		if strings.Contains(sc.Text(), `"id":2`) {
			got = sc.Text()
			break
		}
	}
	inW.Close()
	go io.Copy(io.Discard, outR)
	if !strings.Contains(tooLong, `"code":-32600`) || !strings.Contains(tooLong, "message too large") {
		t.Errorf("the answer to a line too long: %q", tooLong)
	}
	if !strings.Contains(got, "from the workspace") || strings.Contains(got, `"isError":true`) {
		t.Errorf("run_command answer: %s (stderr %s)", got, errb.String())
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("moat mcp exited %d: %s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("moat mcp did not end with its stdin")
	}
}

// TestMCPPolicyWorkspace: a policy file that names its workspace, as
// one written for moat run does, gives moat mcp its workspace when
// --workspace is not given (relative to the file's directory), and is
// accepted with --workspace naming the same directory.
func TestMCPPolicyWorkspace(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "proj")
	os.Mkdir(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("from the policy's workspace\n"), 0o644)
	pol := filepath.Join(dir, "p.toml")
	os.WriteFile(pol, []byte("[workspace]\npath = \"proj\"\n"), 0o644)
	for _, args := range [][]string{{"mcp", "--policy", pol}, {"mcp", "--policy", pol, "--workspace", ws}} {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		var errb bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- realMain(args, inR, outW, &errb)
			outW.Close()
		}()
		go func() {
			for _, line := range []string{
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"cat f.txt"}}}`,
			} {
				io.WriteString(inW, line+"\n")
			}
		}()
		sc := bufio.NewScanner(outR)
		var got string
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"id":2`) {
				got = sc.Text()
				break
			}
		}
		inW.Close()
		go io.Copy(io.Discard, outR)
		if !strings.Contains(got, "from the policy's workspace") || strings.Contains(got, `"isError":true`) {
			t.Errorf("moat %v: run_command answer: %s (stderr %s)", args, got, errb.String())
		}
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("moat %v exited %d: %s", args, code, errb.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("moat %v did not end with its stdin", args)
		}
	}
}

// TestMCPTrustedPolicyProgramsChecked: moat mcp in a workspace whose
// trusted .moat.toml has a secret with a revoke checks the revoke again
// at the session's end against what `moat trust` hashed, as moat run
// does: the session's secret source here rewrites the revoke when told
// to, and the rewritten revoke does not run, a warning instead. The
// control: unchanged, the revoke runs with the minted value.
func TestMCPTrustedPolicyProgramsChecked(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	const doc = `[network]
mode = "allow"
allow = ["api.test"]

[[secrets]]
name = "TOKEN"
source = "command:./mint"
revoke = "./revoke"
hosts = ["api.test"]
`
	// They start at /, not in the workspace: each names its directory.
	const mint = "#!/bin/sh\nd=$(dirname \"$0\")\n[ -e \"$d/change\" ] && echo '# changed' >> \"$d/revoke\"\necho minted\n"
	for name, body := range map[string]string{".moat.toml": doc, "mint": mint, "revoke": "#!/bin/sh\ncat >> \"$(dirname \"$0\")/revoked\"\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errs := moat(t, ws, "trust"); code != 0 {
		t.Fatalf("trust: %s", errs)
	}
	revoked := func() string {
		b, _ := os.ReadFile(filepath.Join(ws, "revoked"))
		return string(b)
	}
	if code, _, errs := moat(t, ws, "mcp"); code != 0 || revoked() != "minted\n" {
		t.Fatalf("control: moat mcp exited %d (%s), revoked %q", code, errs, revoked())
	}
	os.WriteFile(filepath.Join(ws, "change"), nil, 0o644)
	_, _, errs := moat(t, ws, "mcp")
	if revoked() != "minted\n" {
		t.Errorf("the revoke rewritten since moat trust ran: revoked %q", revoked())
	}
	if !strings.Contains(errs, "not revoked") {
		t.Errorf("no warning that the secret was not revoked: %s", errs)
	}
}
