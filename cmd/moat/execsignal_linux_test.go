//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
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
