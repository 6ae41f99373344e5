// Package proctest helps tests look for processes on the host, to check
// that nothing a sandbox started outlives it (it only reads /proc), and
// keeps the state their runs leave out of the machine's state directory.
package proctest

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/internal/cgroup"
	"github.com/moatbox/moat/internal/daemonrec"
)

// Find returns the pids of host processes whose command line (arguments
// joined by spaces) contains s.
func Find(s string) []int {
	return matching(func(dir string) bool {
		b, err := os.ReadFile(dir + "/cmdline")
		return err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s)
	})
}

// Children returns the pids of the live (not zombie) children of the
// process pid.
func Children(pid int) []int {
	return matching(func(dir string) bool {
		b, err := os.ReadFile(dir + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			return false
		}
		var state string
		var ppid int
		_, err = fmt.Sscanf(s[i+1:], " %s %d", &state, &ppid)
		return err == nil && ppid == pid && state != "Z"
	})
}

// Gone waits up to within for find to return no pid, and returns what it
// returned last.
func Gone(find func() []int, within time.Duration) []int {
	deadline := time.Now().Add(within)
	for {
		pids := find()
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Exited waits up to within for the process pid to have exited (gone, or
// a zombie), and says whether it has. A process whose command line reads
// empty (Find no longer sees it) may still be on its way out, its files
// open: the kernel lets go of its memory first.
func Exited(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		// The state follows the command name's closing parenthesis.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Appear waits up to within for find to return a pid, and returns what it
// returned last. A process whose start was just reported may not show its
// command line yet: the kernel closes the starter's close-on-exec pipe
// before it sets up the new program's arguments.
func Appear(find func() []int, within time.Duration) []int {
	deadline := time.Now().Add(within)
	for {
		pids := find()
		if len(pids) > 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Threads returns this process's number of threads.
func Threads(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	t.Fatal("no Threads in /proc/self/status")
	return 0
}

// matching returns the pids of the processes whose /proc directory match
// accepts.
func matching(match func(dir string) bool) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		if match("/proc/" + e.Name()) {
			out = append(out, pid)
		}
	}
	return out
}

// RunWithStateDir runs the tests of m with MOAT_STATE_DIR, where runs keep
// change sets and quarantines, set to a directory of their own (removed
// afterwards) unless it is set already, with the public records of root
// daemons' sockets (daemonrec.Dir) in it, and returns m.Run's code: never
// the machine's state directory, which is read-only in the QEMU guest of
// scripts/vmtest.sh. A test that needs a state directory of its own sets
// one with t.Setenv.
func RunWithStateDir(m interface{ Run() int }) int {
	if os.Getenv(probeMemoryEnv) != "" {
		if cgroup.Probe().Usable["memory"] {
			return 0
		}
		return 3
	}
	if os.Getenv("MOAT_STATE_DIR") != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "moat-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Not os.RemoveAll alone: a change set kept for review holds what a
	// command made, such as a directory it left mode 0, which an ordinary
	// user's os.RemoveAll cannot descend into. (workspace.RemoveTree does
	// this for moat; this package cannot import it: internal/seccomp's
	// tests use this one.)
	defer removeTree(dir)
	os.Setenv("MOAT_STATE_DIR", dir)
	// And the root daemons' public records of their sockets, in this
	// process, are not the machine's either.
	daemonrec.Dir = filepath.Join(dir, "daemons")
	return m.Run()
}

// removeTree removes dir, a tree of the tests' own, after making each
// of its directories readable, writable and searchable to its owner.
func removeTree(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(dir)
}

const probeMemoryEnv = "MOAT_TEST_PROBE_MEMORY"

// ChildHasMemoryLimit says whether a process the test starts (a daemon, a
// moat mcp) can give its sandboxes a memory limit; the test binary's
// TestMain must end in RunWithStateDir, which answers in the child. The
// test's own process may say otherwise: in a delegated cgroup v2 that
// holds the test alone, the test could use it, while a child of the test
// is not alone there (the kernel's no-internal-process rule).
func ChildHasMemoryLimit() bool {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), probeMemoryEnv+"=1")
	return cmd.Run() == nil
}
