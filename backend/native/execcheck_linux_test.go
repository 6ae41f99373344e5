package native_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
)

// TestCheckExec: every program started inside the sandbox is put to
// Stdio.CheckExec, in both starts, and one it refuses fails with EACCES
// while the shell goes on. The direct start lets the command's own exec
// (decided before the run) through without asking, over every candidate
// of its PATH search; the init stage asks about it too.
func TestCheckExec(t *testing.T) {
	for _, b := range []*native.Backend{{}, {ForkStart: true}, {InitStage: true}} {
		ws := t.TempDir()
		var mu sync.Mutex
		var seen [][]string
		check := func(c backend.ExecCall) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, c.Argv)
			if slices.Contains(c.Argv, "refuse-me") {
				return errors.New("refused")
			}
			return nil
		}
		var out, errb bytes.Buffer
		s := spec(t, ws, "sh", "-c", "/bin/true refuse-me; echo \"refused: $?\"; /bin/true fine; echo \"control: $?\"")
		st, err := b.Run(context.Background(), s, backend.Stdio{Stdout: &out, Stderr: &errb, CheckExec: check})
		if err != nil || st.ExitCode != 0 {
			t.Fatalf("%+v: %v %+v\n%s", b, err, st, errb.String())
		}
		if out.String() != "refused: 126\ncontrol: 0\n" {
			t.Errorf("%+v: output %q, stderr %q", b, out.String(), errb.String())
		}
		mu.Lock()
		sawSh := slices.ContainsFunc(seen, func(a []string) bool { return len(a) > 0 && a[0] == "sh" })
		sawTrue := slices.ContainsFunc(seen, func(a []string) bool { return slices.Equal(a, []string{"/bin/true", "fine"}) })
		mu.Unlock()
		if !sawTrue || sawSh != b.InitStage {
			t.Errorf("%+v: checked %q (want true fine; sh only in the init stage)", b, seen)
		}
	}
}

// TestCheckExecRunsWhatWasChecked: a program swapped for another file
// after the check read it, and before the kernel opened it, is killed at
// its first instruction: the file the image runs is not one the check
// read (found by a tester: a concurrent run flipped ./tool to a link to
// git as inotify saw the check read it, and git push ran as decided for
// tool). The same program left alone runs (the positive control).
func TestCheckExecRunsWhatWasChecked(t *testing.T) {
	for _, b := range []*native.Backend{{}, {ForkStart: true}, {InitStage: true}} {
		ws := t.TempDir()
		truth, err := os.ReadFile("/bin/true")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"tool", "tool2"} {
			if err := os.WriteFile(filepath.Join(ws, n), truth, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(ws, "swapped"), []byte("#!/bin/sh\necho SWAPPED RAN\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/bin/echo", filepath.Join(ws, "echo-link")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "tool3"), []byte("#!./interp3\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		check := func(c backend.ExecCall) error {
			switch {
			case len(c.Argv) == 0:
			case c.Argv[0] == "./tool":
				// Read as the rules read it, then swapped before the
				// kernel's open.
				if f, err := c.Open(""); err == nil {
					f.Close()
				}
				if err := os.Rename(filepath.Join(ws, "swapped"), filepath.Join(ws, "tool")); err != nil {
					return err
				}
			case c.Argv[0] == "./tool2" && c.Argv[len(c.Argv)-1] == "between":
				// Swapped between the check's reads: its name was taken
				// as true's, its content is read after the swap (each
				// read was an open of the path before, and the file
				// read last ran).
				if err := os.Rename(filepath.Join(ws, "echo-link"), filepath.Join(ws, "tool2")); err != nil {
					return err
				}
				if f, err := c.Open(""); err == nil {
					f.Close()
				}
			case c.Argv[0] == "./tool3":
				// Its interpreter, missing when the check looked, is
				// there when the kernel looks.
				if err := os.Symlink("/bin/echo", filepath.Join(ws, "interp3")); err != nil {
					return err
				}
			}
			return nil
		}
		var out, errb bytes.Buffer
		s := spec(t, ws, "sh", "-c", `./tool; echo "swapped: $?"; ./tool2; echo "control: $?"; ./tool2 between; echo "between: $?"; ./tool3; echo "interpreter: $?"`)
		st, err := b.Run(context.Background(), s, backend.Stdio{Stdout: &out, Stderr: &errb, CheckExec: check})
		if err != nil || st.ExitCode != 0 {
			t.Fatalf("%+v: %v %+v\n%s", b, err, st, errb.String())
		}
		if out.String() != "swapped: 137\ncontrol: 0\nbetween: 137\ninterpreter: 137\n" {
			t.Errorf("%+v: output %q, stderr %q", b, out.String(), errb.String())
		}
	}
}

// TestCheckExecOfAScriptAnyWay: a #! script runs under the exec check
// when started through /proc's links (/proc/self/cwd/run.sh, whose path
// the check after the exec cannot follow from outside) and with an empty
// argv (perl's exec {"./run.sh"} (), whose cmdline is the interpreter's
// and the script's name alone): both were killed (found by a tester).
// The control: a script whose argv was rewritten after the check read
// it is killed still, as TestCheckExecRunsWhatWasChecked shows for
// files; here, ./run.sh as itself runs.
func TestCheckExecOfAScriptAnyWay(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("no perl to exec with an empty argv")
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "run.sh"), []byte("#!/bin/sh\necho \"ran $#\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	check := func(c backend.ExecCall) error {
		if f, err := c.Open(""); err == nil {
			f.Close() // read as the rules read it
		}
		return nil
	}
	var out, errb bytes.Buffer
	s := spec(t, ws, "sh", "-c", `./run.sh a; echo "control: $?"; /proc/self/cwd/run.sh a b; echo "proc: $?"; perl -e 'exec {"./run.sh"} ()'; echo "empty argv: $?"`)
	st, err := (&native.Backend{}).Run(context.Background(), s, backend.Stdio{Stdout: &out, Stderr: &errb, CheckExec: check})
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("%v %+v\n%s", err, st, errb.String())
	}
	if want := "ran 1\ncontrol: 0\nran 2\nproc: 0\nran 0\nempty argv: 0\n"; out.String() != want {
		t.Errorf("output %q, want %q; stderr %q", out.String(), want, errb.String())
	}
}
