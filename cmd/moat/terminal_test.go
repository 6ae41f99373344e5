//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// outerTerminal is a pty made by a test to stand for the person's terminal:
// moat runs on its slave, as from a shell, and the test types and reads on
// its master.
type outerTerminal struct {
	master *os.File
	slave  *os.File
	rdev   uint64 // the slave's device number

	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{} // closed when the master reads end of file (EIO)
}

func newOuterTerminal(t *testing.T) *outerTerminal {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		t.Fatal(errno)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(s), &st); err != nil {
		t.Fatal(err)
	}
	o := &outerTerminal{master: os.NewFile(uintptr(m), "ptmx"), slave: os.NewFile(s, "pts"), rdev: st.Rdev, done: make(chan struct{})}
	t.Cleanup(func() { o.master.Close(); o.slave.Close() })
	return o
}

// start runs moat on the slave, as a shell runs a job in the foreground of
// its terminal, and reads everything the terminal shows.
func (o *outerTerminal) start(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	return o.startCmd(t, dir, exec.Command(os.Args[0], args...))
}

func (o *outerTerminal) startCmd(t *testing.T, dir string, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
	cmd.Dir = dir
	// A cmd given a stdin (or a stdout) of its own keeps it; the
	// terminal is then its controlling terminal through stdout (stderr).
	ctty := 2
	if cmd.Stdout == nil {
		cmd.Stdout, ctty = o.slave, 1
	}
	if cmd.Stdin == nil {
		cmd.Stdin, ctty = o.slave, 0
	}
	cmd.Stderr = o.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: ctty}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Only moat holds the slave now: the master reads EIO once moat has
	// exited, and nothing else can keep it open.
	o.slave.Close()
	go func() {
		defer close(o.done)
		buf := make([]byte, 4096)
		for {
			n, err := o.master.Read(buf)
			o.mu.Lock()
			o.out.Write(buf[:n])
			o.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return cmd
}

func (o *outerTerminal) shown() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.out.String()
}

// waitFor waits until the terminal has shown s.
func (o *outerTerminal) waitFor(t *testing.T, s string) {
	t.Helper()
	o.waitForN(t, s, 1)
}

// waitForN waits until the terminal has shown s n times.
func (o *outerTerminal) waitForN(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a QEMU guest under emulation is slow
	for strings.Count(o.shown(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q; it shows %q", s, o.shown())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wait waits for moat to exit and the terminal to have shown all of its
// output, and returns moat's exit code.
func (o *outerTerminal) wait(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("moat did not exit; the terminal shows %q", o.shown())
	}
	select {
	case <-o.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the terminal is still open after moat exited; it shows %q", o.shown())
	}
	return cmd.ProcessState.ExitCode()
}

// mode is the terminal's mode as its user now finds it. On the master
// TCGETS reads the slave's termios.
func (o *outerTerminal) mode(t *testing.T) *unix.Termios {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(o.master.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio
}

// starts are the two ways moat starts a run: directly, and through the
// init stage (which an overlay workspace under a disk limit needs).
var starts = []struct {
	name  string
	flags []string
}{
	{"direct", nil},
	{"init stage", []string{"--workspace-mode", "overlay", "--disk", "64M"}},
}

// TestTerminalModeRestored: whatever the command does to its terminal and
// however the run ends, the person's terminal has its mode back afterwards.
func TestTerminalModeRestored(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		script string
		then   func(t *testing.T, o *outerTerminal, cmd *exec.Cmd)
	}{
		{name: "exit", script: "stty -echo -icanon; echo done"},
		{name: "exit via init stage", args: starts[1].flags, script: "stty -echo -icanon; echo done"},
		{name: "command killed", script: "stty -echo -icanon; echo done; kill -9 $$"},
		{name: "output limit", args: []string{"--output", "4K"}, script: "stty -echo -icanon; echo done; yes"},
		{name: "moat SIGTERM twice", script: `trap "" TERM INT; stty -echo -icanon; echo done; sleep 60`,
			then: func(t *testing.T, o *outerTerminal, cmd *exec.Cmd) {
				time.Sleep(100 * time.Millisecond) // past the command's stty
				cmd.Process.Signal(syscall.SIGTERM)
				time.Sleep(50 * time.Millisecond)
				cmd.Process.Signal(syscall.SIGTERM)
			}},
		{name: "moat SIGINT twice", script: `trap "" TERM INT; stty -echo -icanon; echo done; sleep 60`,
			then: func(t *testing.T, o *outerTerminal, cmd *exec.Cmd) {
				time.Sleep(100 * time.Millisecond)
				cmd.Process.Signal(syscall.SIGINT)
				time.Sleep(50 * time.Millisecond)
				cmd.Process.Signal(syscall.SIGINT)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOuterTerminal(t)
			before := o.mode(t)
			if before.Lflag&unix.ECHO == 0 || before.Lflag&unix.ICANON == 0 {
				t.Fatalf("a new pty without echo or canonical mode: %#x", before.Lflag)
			}
			args := append(append([]string{"run"}, tc.args...), "--", "sh", "-c", tc.script)
			cmd := o.start(t, t.TempDir(), args...)
			o.waitFor(t, "done")
			if tc.then != nil {
				tc.then(t, o, cmd)
			}
			code := o.wait(t, cmd)
			after := o.mode(t)
			if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag {
				t.Errorf("after the run (exit %d) the terminal's modes are lflag %#x iflag %#x oflag %#x, want %#x %#x %#x; it showed %q",
					code, after.Lflag, after.Iflag, after.Oflag, before.Lflag, before.Iflag, before.Oflag, o.shown())
			}
		})
	}
}

// TestTerminalOutputCounted: what the command writes to its terminal is
// output like any other, and the output limit stops it.
func TestTerminalOutputCounted(t *testing.T) {
	o := newOuterTerminal(t)
	// The command writes to /dev/tty, its terminal, or where it has none,
	// to the terminal on its stdin.
	script := `if (: >/dev/tty) 2>/dev/null; then exec >/dev/tty; else exec >&0; fi; head -c 100000 /dev/zero | tr '\0' x`
	cmd := o.start(t, t.TempDir(), "run", "--output", "4K", "--", "sh", "-c", script)
	code := o.wait(t, cmd)
	shown := o.shown()
	if n := strings.Count(shown, "x"); code == 0 || n > 4096 || !strings.Contains(shown, "output limit") {
		t.Errorf("exit %d, %d bytes reached the terminal (limit 4K): want the run stopped by the output limit; stderr: %q", code, n, strings.ReplaceAll(shown, "x", ""))
	}
}

// TestTerminalUnreachable: the command has no way to the person's
// terminal: no fd of it anywhere in the sandbox, and its device cannot be
// opened. The positive control: the command can write to its own.
func TestTerminalUnreachable(t *testing.T) {
	for _, st := range starts {
		t.Run(st.name, func(t *testing.T) {
			o := newOuterTerminal(t)
			unreachable(t, o, st.flags)
		})
	}
}

func unreachable(t *testing.T, o *outerTerminal, flags []string) {
	name, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", o.slave.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%x:%x", unix.Major(o.rdev), unix.Minor(o.rdev))
	// Every fd of every process the command can see, with its device
	// number; then a write to the person's terminal by its host path.
	script := `for f in /proc/[0-9]*/fd/*; do stat -L -c "fd $f %t:%T" "$f" 2>/dev/null; done
echo "own terminal $(stat -L -c %t:%T /dev/tty)"
echo MINE >/dev/tty
echo THEIRS 2>/dev/null >` + name + ` && echo "opened ` + name + `"
true`
	args := append(append([]string{"run"}, flags...), "--", "sh", "-c", script)
	cmd := o.start(t, t.TempDir(), args...)
	if code := o.wait(t, cmd); code != 0 {
		t.Fatalf("exit %d: %q", code, o.shown())
	}
	shown := o.shown()
	for _, line := range strings.Split(shown, "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), " "+want) {
			t.Errorf("the command reaches the person's terminal (%s, %s): %q", name, want, line)
		}
	}
	if strings.Contains(shown, "THEIRS") || strings.Contains(shown, "opened ") {
		t.Errorf("the command wrote to %s: %q", name, shown)
	}
	if !strings.Contains(shown, "MINE") || !strings.Contains(shown, "own terminal ") {
		t.Errorf("the command could not write to its own terminal: %q", shown)
	}
}

// TestTerminalInteractive: a person types at the command through moat and
// sees its answers, as at any terminal; Ctrl-C reaches the command.
func TestTerminalInteractive(t *testing.T) {
	for _, st := range starts {
		t.Run("sh "+st.name, func(t *testing.T) {
			o := newOuterTerminal(t)
			args := append(append([]string{"run"}, st.flags...), "--", "sh", "-c", `printf "name? "; read n; echo "hello $n"`)
			cmd := o.start(t, t.TempDir(), args...)
			o.waitFor(t, "name? ")
			o.master.Write([]byte("moat\r")) // Enter, as a terminal sends it
			if code := o.wait(t, cmd); code != 0 || !strings.Contains(o.shown(), "moat\r\nhello moat\r\n") {
				t.Errorf("exit %d; the terminal showed %q, want the echo of the answer, then the greeting", code, o.shown())
			}
		})
	}
	t.Run("python3", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/python3"); err != nil {
			t.Skip("no /usr/bin/python3")
		}
		o := newOuterTerminal(t)
		cmd := o.start(t, t.TempDir(), "run", "--", "/usr/bin/python3", "-q")
		o.waitFor(t, ">>> ")
		o.master.Write([]byte("import time; time.sleep(60)\r"))
		o.waitFor(t, "time.sleep(60)\r\n") // the line, echoed as Enter sends it
		time.Sleep(200 * time.Millisecond)
		o.master.Write([]byte{3}) // Ctrl-C: KeyboardInterrupt, not the end of the run
		o.waitFor(t, "KeyboardInterrupt")
		o.waitForN(t, ">>> ", 2)
		o.master.Write([]byte("print(6*7)\r"))
		o.waitFor(t, "42\r\n")
		o.waitForN(t, ">>> ", 3)
		o.master.Write([]byte{4}) // Ctrl-D ends the REPL
		if code := o.wait(t, cmd); code != 0 {
			t.Errorf("exit %d; the terminal showed %q", code, o.shown())
		}
	})
}

// TestTerminalResize: the command's terminal takes the size of the
// person's, at the start and when it changes.
func TestTerminalResize(t *testing.T) {
	o := newOuterTerminal(t)
	size := func(rows, cols uint16) {
		if err := unix.IoctlSetWinsize(int(o.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
			t.Fatal(err)
		}
	}
	size(24, 80)
	cmd := o.start(t, t.TempDir(), "run", "--", "sh", "-c", `echo "size $(stty size)"; while read x; do echo "size $(stty size)"; done`)
	o.waitFor(t, "size 24 80")
	// The kernel sends moat, in the terminal's foreground, SIGWINCH; moat
	// resizes the pty in its own time, so ask until it shows.
	size(50, 132)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(o.shown(), "size 50 132") && time.Now().Before(deadline) {
		o.master.Write([]byte("\r"))
		time.Sleep(20 * time.Millisecond)
	}
	o.master.Write([]byte{4})
	o.wait(t, cmd)
	if !strings.Contains(o.shown(), "size 50 132") {
		t.Errorf("the command's terminal was not resized: %q", o.shown())
	}
}

// TestTerminalInBackground: moat started in the background of a terminal
// (a shell's `moat run ... &`) leaves the terminal to the shell: the
// command's stdin is /dev/null, its mode is untouched, and moat is not
// stopped for trying to change it.
func TestTerminalInBackground(t *testing.T) {
	o := newOuterTerminal(t)
	script := `if read x; then echo "read $x"; else echo "no input"; fi; stty -echo 2>/dev/null; echo done`
	// A shell with job control runs moat in a process group of its own,
	// not the terminal's foreground.
	shell := exec.Command("sh", "-c", `set -m; "$0" run -- sh -c "$1" & wait $!; echo "moat exited $?"`, os.Args[0], script)
	before := o.mode(t)
	cmd := o.startCmd(t, t.TempDir(), shell)
	o.waitFor(t, "moat exited")
	o.wait(t, cmd)
	shown := o.shown()
	if !strings.Contains(shown, "no input") || !strings.Contains(shown, "done") || !strings.Contains(shown, "moat exited 0") {
		t.Errorf("the terminal showed %q, want the command to find no input and moat to finish", shown)
	}
	if after := o.mode(t); after.Lflag != before.Lflag {
		t.Errorf("lflag %#x after the run, want %#x", after.Lflag, before.Lflag)
	}
}

// TestTerminalRestoredOnEarlySignal: SIGTERM as soon as moat has made the
// terminal raw, well inside the 50 ms before its signal handlers would
// otherwise go in, is handled, and the terminal gets its mode back.
func TestTerminalRestoredOnEarlySignal(t *testing.T) {
	o := newOuterTerminal(t)
	before := o.mode(t)
	cmd := o.start(t, t.TempDir(), "run", "--", "sleep", "10")
	deadline := time.Now().Add(10 * time.Second)
	for o.mode(t).Lflag&unix.ECHO != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("moat never made the terminal raw: %q", o.shown())
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Process.Signal(syscall.SIGTERM)
	o.wait(t, cmd)
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() {
		t.Errorf("moat died of %v", ws.Signal())
	}
	if after := o.mode(t); after.Lflag != before.Lflag {
		t.Errorf("lflag %#x after the run, want %#x; the terminal showed %q", after.Lflag, before.Lflag, o.shown())
	}
}

// TestTerminalUnreadInput: keystrokes the command never reads (more than
// its pty holds) do not keep moat from ending with the command.
func TestTerminalUnreadInput(t *testing.T) {
	o := newOuterTerminal(t)
	cmd := o.start(t, t.TempDir(), "run", "--", "sh", "-c", "echo ready; sleep 1")
	o.waitFor(t, "ready")
	go func() {
		line := bytes.Repeat([]byte("x"), 1023)
		for i := 0; i < 64; i++ {
			if _, err := o.master.Write(append(line, '\r')); err != nil {
				return
			}
		}
	}()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("moat did not end with the command")
	}
}

// TestTerminalControlSequencesFiltered: what the command writes to the
// person's terminal, through its pty or through a pipe when moat's stdin is
// no terminal, loses the sequences that reach beyond the screen (a
// clipboard write, a title report) and keeps those that draw (a title, a
// colour: the positive control), and stderr says what was dropped. Output
// that is no terminal keeps them all.
func TestTerminalControlSequencesFiltered(t *testing.T) {
	const script = `printf 'a\033]52;c;cm0gLXJmIH4K\007b\033]0;moat-title\007c\033[21t\033[31md\033[0m\n'`
	for _, st := range starts {
		for _, stdin := range []string{"terminal", "pipe", "pipe --json"} {
			t.Run(st.name+"/"+stdin, func(t *testing.T) {
				o := newOuterTerminal(t)
				args := append([]string{"run"}, st.flags...)
				if stdin == "pipe --json" {
					// Its stdout passes through the --json line keeper
					// too (a reviewer found it unfiltered).
					args = append(args, "--json")
				}
				cmd := exec.Command(os.Args[0], append(args, "--", "sh", "-c", script)...)
				if stdin != "terminal" {
					cmd.Stdin = strings.NewReader("")
				}
				o.startCmd(t, t.TempDir(), cmd)
				if code := o.wait(t, cmd); code != 0 {
					t.Fatalf("exit %d: %q", code, o.shown())
				}
				shown := o.shown()
				if !strings.Contains(shown, "ab\x1b]0;moat-title\x07c\x1b[31md\x1b[0m") {
					t.Errorf("the terminal showed %q: want the text, the title and the colours", shown)
				}
				out, _, _ := strings.Cut(shown, `{"run_id"`) // the report quotes the command line
				if strings.Contains(out, "]52;") || strings.Contains(out, "[21t") {
					t.Errorf("the terminal showed %q: a clipboard write or a title report reached it", shown)
				}
				if stdin == "pipe --json" {
					if !strings.Contains(shown, `"layer":"terminal","what":"OSC 52 (clipboard)"`) {
						t.Errorf("the report does not say what was dropped: %q", shown)
					}
				} else if !strings.Contains(shown, "dropped from the output to the terminal: CSI 21 t") || !strings.Contains(shown, "OSC 52 (clipboard) ×1") {
					t.Errorf("stderr does not say what was dropped: %q", shown)
				}
			})
		}
	}
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "run", "--", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1")
	cmd.Dir, cmd.Stdout = t.TempDir(), &out
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "a\x1b]52;c;cm0gLXJmIH4K\x07b") {
		t.Errorf("output to a pipe: %v, %q: want it as written", err, out.String())
	}
}

// TestSessionTerminalControlSequencesFiltered: moat exec filters a
// session's output to the person's terminal as moat run does, with a
// terminal of the command's (-t) and without; output to a pipe keeps the
// sequences (the positive control).
func TestSessionTerminalControlSequencesFiltered(t *testing.T) {
	const script = `printf 'a\033]52;c;cm0gLXJmIH4K\007b\033]0;moat-title\007c\n'`
	dir := t.TempDir()
	sock, _ := startServe(t)
	id := policySession(t, dir, sock, "")
	for _, tty := range [][]string{nil, {"-t"}} {
		t.Run(fmt.Sprintf("tty=%v", tty != nil), func(t *testing.T) {
			o := newOuterTerminal(t)
			args := append(append([]string{"exec", "--socket", sock}, tty...), id, "--", "sh", "-c", script)
			cmd := o.start(t, dir, args...)
			if code := o.wait(t, cmd); code != 0 {
				t.Fatalf("exit %d: %q", code, o.shown())
			}
			shown := o.shown()
			if !strings.Contains(shown, "ab\x1b]0;moat-title\x07c") || strings.Contains(shown, "]52;") {
				t.Errorf("the terminal showed %q: want the text and the title, no clipboard write", shown)
			}
			if !strings.Contains(shown, "moat exec: dropped from the output to the terminal: OSC 52 (clipboard) ×1") {
				t.Errorf("stderr does not say what was dropped: %q", shown)
			}
		})
	}
	// moat logs filters a background command's output the same way.
	code, pid, _ := moat(t, dir, "exec", "--socket", sock, "-d", id, "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("exec -d: %d", code)
	}
	o := newOuterTerminal(t)
	cmd := o.start(t, dir, "logs", "--socket", sock, "-f", id, strings.TrimSpace(pid))
	if code := o.wait(t, cmd); code != 0 {
		t.Fatalf("logs: exit %d: %q", code, o.shown())
	}
	if shown := o.shown(); !strings.Contains(shown, "ab\x1b]0;moat-title\x07c") || strings.Contains(shown, "]52;") ||
		!strings.Contains(shown, "moat logs: dropped from the output to the terminal: OSC 52 (clipboard) ×1") {
		t.Errorf("moat logs showed %q", shown)
	}
	code, out, errs := moat(t, dir, "exec", "--socket", sock, id, "--", "sh", "-c", script)
	if code != 0 || !strings.Contains(out, "a\x1b]52;c;cm0gLXJmIH4K\x07b") {
		t.Errorf("output to a pipe: %d %q %q: want it as written", code, out, errs)
	}
	// moat cp of a file the command wrote, to stdout, too.
	if code, _, errs := moat(t, dir, "exec", "--socket", sock, id, "--", "sh", "-c", script+" > seq.txt"); code != 0 {
		t.Fatalf("exec: %d %q", code, errs)
	}
	o = newOuterTerminal(t)
	cmd = o.start(t, dir, "cp", "--socket", sock, id+":seq.txt", "-")
	if code := o.wait(t, cmd); code != 0 {
		t.Fatalf("cp: exit %d: %q", code, o.shown())
	}
	if shown := o.shown(); !strings.Contains(shown, "ab\x1b]0;moat-title\x07c") || strings.Contains(shown, "]52;") ||
		!strings.Contains(shown, "moat cp: dropped from the output to the terminal: OSC 52 (clipboard) ×1") {
		t.Errorf("moat cp to the terminal showed %q", shown)
	}
	code, out, errs = moat(t, dir, "cp", "--socket", sock, id+":seq.txt", "-")
	if code != 0 || !strings.Contains(out, "a\x1b]52;c;cm0gLXJmIH4K\x07b") {
		t.Errorf("moat cp to a pipe: %d %q %q: want it as written", code, out, errs)
	}
}

// TestExecCutSaysWhatWasDropped: an exec whose stream is cut after some
// output (the daemon went away) still says what the filter dropped from
// that output; the control: the text around it was shown.
func TestExecCutSaysWhatWasDropped(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "fake.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/exec") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintln(w, `{"code":"not_found","message":"no such thing"}`)
			return
		}
		// moat exec streams its input in the request as the output comes.
		http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `{"stream":"stdout","data":"a\u001b]52;c;cm0gLXJmIH4K\u0007b\n"}`)
		w.(http.Flusher).Flush()
		// The client has the answer's head and the output before the
		// connection goes (a close at once can fail its request's
		// write first).
		go io.Copy(io.Discard, r.Body)
		time.Sleep(300 * time.Millisecond)
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close() // cut: no exit event
		}
	})}
	go srv.Serve(l)
	defer srv.Close()
	for _, tty := range [][]string{nil, {"-t"}} {
		t.Run(fmt.Sprintf("tty=%v", tty != nil), func(t *testing.T) {
			o := newOuterTerminal(t)
			args := append(append([]string{"exec", "--socket", sock}, tty...), "s1", "--", "true")
			cmd := o.start(t, t.TempDir(), args...)
			code := o.wait(t, cmd)
			shown := o.shown()
			if code == 0 || !strings.Contains(shown, "ab") || strings.Contains(shown, "]52;") {
				t.Fatalf("exit %d, the terminal showed %q: want a failure after the text, no clipboard write", code, shown)
			}
			if !strings.Contains(shown, "moat exec: dropped from the output to the terminal: OSC 52 (clipboard) ×1") {
				t.Errorf("a cut exec does not say what was dropped: %q", shown)
			}
		})
	}
}
