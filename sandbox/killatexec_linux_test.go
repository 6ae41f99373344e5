//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestSessionKillAtExec: a command killed as it starts, while the exec
// check follows its exec into the new image (the supervisor traces it
// from the exec's notification to the new image's first stop), ends and
// is reported: the supervisor lets go of it however the kill falls, and
// the session's init, its parent, reaps it. A kill that woke it from the
// tracer's stop once left it a zombie only the tracer could collect, and
// the command's end never came. The control: the same command, not
// killed, runs to its end, and the rule it passes is checked.
func TestSessionKillAtExec(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "run.sh"), []byte("sleep 0.01; echo slept; whoami 2>/dev/null; echo $?\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, ws, func(p *policy.Policy) {
		// A rule on a command makes the session check every exec.
		p.Rules = append(p.Rules, policy.Rule{Name: "no-whoami", Match: policy.Match{Command: []string{"whoami"}}, Decision: "deny", Reason: "test: every exec is checked"})
	})
	// The shell's complaint about whoami goes to /dev/null: its stderr and
	// stdout are two pipes, read in no set order.
	if out, rep, _ := sessionSh(t, s, sandbox.ExecRequest{}, "sh run.sh"); out != "slept\n126\n" || rep.ExitCode != 0 || len(rep.Denials) != 1 || rep.Denials[0].What != "whoami" {
		t.Fatalf("control: %q %+v, want sleep to run and whoami refused at its exec", out, rep)
	}
	runs := 300
	if testing.Short() {
		runs = 40
	}
	for i := range runs {
		p, err := s.Start(context.Background(), &sandbox.ExecRequest{Args: []string{"sleep", "30"}}, backend.Stdio{})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		// The kill falls at another point of the start each time: the
		// window it once hung in is the tracer's look at the new image.
		time.Sleep(time.Duration(i%64) * 15 * time.Microsecond)
		p.Signal(syscall.SIGKILL)
		done := make(chan *sandbox.Report, 1)
		go func() {
			rep, _ := p.Wait()
			done <- rep
		}()
		select {
		case rep := <-done:
			if rep.ExitCode != 137 {
				t.Fatalf("run %d: %+v, want the end of a SIGKILL", i, rep)
			}
		case <-time.After(25 * time.Second):
			// Nor could the session be closed (its init waits for the
			// zombie too): end here rather than at the test's timeout.
			fmt.Fprintf(os.Stderr, "--- FAIL: TestSessionKillAtExec: run %d: sleep was killed as it started, and its end never came\n", i)
			os.Exit(1)
		}
	}
}
