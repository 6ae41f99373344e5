//go:build linux

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExecForwardsSignals: moat exec sends its SIGINT or SIGTERM on to
// the command, as moat run does, so that the command's trap runs and
// its status is moat's (before, the command was killed, its trap never
// ran, tried); a command the signal ends exits 128+N and moat says so;
// a second signal, to a command that ignores the first, ends it
// (128+N). Each case waits for the command's first line, so that the
// signal comes while it runs.
func TestExecForwardsSignals(t *testing.T) {
	sock, _ := startServe(t)
	dir := t.TempDir()
	code, out, errs := moat(t, dir, "session", "create", "--socket", sock, "--temp")
	if code != 0 {
		t.Fatalf("session create: %d %q", code, errs)
	}
	id := strings.TrimSpace(out)
	for _, tc := range []struct {
		name   string
		sig    syscall.Signal
		times  int
		script string
		code   int
		out    string
	}{
		{"INT, trapped", syscall.SIGINT, 1, `trap 'echo trapped INT; exit 9' INT; echo ready; sleep 30 & wait`, 9, "trapped INT"},
		{"TERM, trapped", syscall.SIGTERM, 1, `trap 'echo trapped TERM; exit 7' TERM; echo ready; sleep 30 & wait`, 7, "trapped TERM"},
		{"INT twice, ignored", syscall.SIGINT, 2, `trap '' INT; echo ready; sleep 30`, 130, ""},
		{"TERM, not trapped", syscall.SIGTERM, 1, `echo ready; exec sleep 30`, 143, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "exec", "--socket", sock, id, "--", "sh", "-c", tc.script)
			cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
			var stdout, stderr bytes.Buffer
			pr, pw, _ := os.Pipe()
			cmd.Stdout, cmd.Stderr = pw, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			buf := make([]byte, 6)
			if _, err := pr.Read(buf); err != nil || string(buf) != "ready\n" {
				cmd.Process.Kill()
				t.Fatalf("first line %q %v", buf, err)
			}
			for range tc.times {
				cmd.Process.Signal(tc.sig)
				time.Sleep(300 * time.Millisecond)
			}
			stdout.ReadFrom(pr)
			cmd.Wait()
			if got := cmd.ProcessState.ExitCode(); got != tc.code || !strings.Contains(stdout.String(), tc.out) || got > 128 && !strings.Contains(stderr.String(), "SIG") {
				t.Errorf("exit %d, output %q, stderr %q; want %d and %q", got, stdout.String(), stderr.String(), tc.code, tc.out)
			}
		})
	}
}

// TestExecOverTCP: over TCP moat exec sends a plain exec (a proxy in
// front may hold back a request body that stays open), and -i an
// interactive one: both run, with the command's status.
func TestExecOverTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	tokens := filepath.Join(t.TempDir(), "tokens")
	sum := sha256.Sum256([]byte("tcp-test-token"))
	os.WriteFile(tokens, []byte("alice sha256:"+hex.EncodeToString(sum[:])+"\n"), 0o600)
	startServe(t, "--listen", addr, "--tokens", tokens)
	t.Setenv("MOAT_HOST", "http://"+addr)
	t.Setenv("MOAT_TOKEN", "tcp-test-token")
	dir := t.TempDir()
	code, out, errs := moat(t, dir, "session", "create", "--temp")
	if code != 0 {
		t.Fatalf("session create over TCP: %d %q", code, errs)
	}
	id := strings.TrimSpace(out)
	if code, out, errs := moat(t, dir, "exec", id, "--", "sh", "-c", "echo plain; exit 3"); code != 3 || out != "plain\n" {
		t.Errorf("exec over TCP: %d %q %q", code, out, errs)
	}
	if code, out, errs := moat(t, dir, "exec", "-i", id, "--", "sh", "-c", "cat; exit 4"); code != 4 || out != "" {
		t.Errorf("exec -i over TCP: %d %q %q", code, out, errs)
	}
}
