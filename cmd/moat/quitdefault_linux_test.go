package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func quitHandler(t *testing.T) uint64 {
	t.Helper()
	var cur [4]uint64
	if _, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGQUIT), 0, uintptr(unsafe.Pointer(&cur)), 8, 0, 0); errno != 0 {
		t.Fatal(errno)
	}
	return cur[0]
}

// TestQuitDefault: quitDefault gives SIGQUIT its default action, and its
// restore the handler before back (the control: the handler before is
// not the default).
func TestQuitDefault(t *testing.T) {
	// An earlier run in this process left SIGQUIT at its default: the
	// handler before is SIG_IGN then, put back at the end.
	before := quitHandler(t)
	if before == 0 {
		ign := [4]uint64{1} // SIG_IGN
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGQUIT), uintptr(unsafe.Pointer(&ign)), 0, 8, 0, 0)
		defer func() { _ = quitDefault() }()
		before = 1
	}
	restore := quitDefault()
	if h := quitHandler(t); h != 0 {
		t.Errorf("after quitDefault the handler is %#x, want SIG_DFL", h)
	}
	restore()
	if h := quitHandler(t); h != before {
		t.Errorf("after restore the handler is %#x, want the runtime's %#x", h, before)
	}
}

// TestQuitEarlyNoDump: Ctrl-\ (SIGQUIT) as soon as the command has
// started, before or after moat's handlers are in, ends the run without
// the Go runtime's dump of its goroutines; a run that keeps a report
// writes it. (TestSignalsAreForwarded: later, the command gets it.)
func TestQuitEarlyNoDump(t *testing.T) {
	ws := t.TempDir()
	for _, report := range []bool{false, true} {
		for range 3 {
			rep := filepath.Join(t.TempDir(), "report.json")
			args := []string{"run"}
			if report {
				args = append(args, "--report", rep)
			}
			cmd := exec.Command(os.Args[0], append(args, "--", "sh", "-c", "echo ready; sleep 10")...)
			cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
			cmd.Dir = ws
			var errs bytes.Buffer
			cmd.Stderr = &errs
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 6)
			if _, err := io.ReadFull(out, buf); err != nil {
				cmd.Process.Kill()
				t.Fatalf("no ready line: %v", err)
			}
			cmd.Process.Signal(syscall.SIGQUIT)
			io.Copy(io.Discard, out)
			err := cmd.Wait()
			if strings.Contains(errs.String(), "goroutine") || strings.Contains(errs.String(), "SIGQUIT: quit") {
				t.Fatalf("report %v: the Go runtime's dump reached stderr: %q", report, errs.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("report %v: moat did not end by the signal: %v", report, err)
			}
			if report {
				if b, err := os.ReadFile(rep); err != nil || len(b) == 0 {
					t.Errorf("no report after an early SIGQUIT: %v; stderr %q", err, errs.String())
				}
			}
		}
	}
}
