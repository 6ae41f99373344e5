package rt0

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEntryPoint builds a program with the entry point, as moat is built,
// and starts it from a thread whose timer slack is 123456 ns: the entry
// point must have seen that, raised the first thread's to 500 µs before
// the runtime started (main still has it: it runs on the first thread),
// and Restore must put it back. A coarser inherited slack (2 ms) is kept.
// Without -E the program must change nothing.
func TestEntryPoint(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("the entry point exists for amd64 and arm64, not %s", runtime.GOARCH)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the probe with: %v", err)
	}
	dir := t.TempDir()
	for _, v := range []struct {
		name, ldflags string
		slack         uintptr
		want          string
	}{
		{"with the entry point", "-E=_rt0_moat", 123456, "true 123456 500000 123456"},
		{"with it, a coarser slack inherited", "-E=_rt0_moat", 2000000, "true 2000000 2000000 2000000"},
		{"without it", "", 123456, "false 0 123456 123456"},
	} {
		bin := filepath.Join(dir, strings.ReplaceAll(v.name, " ", "-"))
		build := exec.Command(gobin, "build", "-buildvcs=false", "-ldflags="+v.ldflags, "-o", bin, "./testdata/probe")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("%s: go build: %v\n%s", v.name, err, out)
		}
		out, err := runWithSlack(bin, v.slack)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if got := strings.TrimSpace(out); got != v.want {
			t.Errorf("%s: linked, entry slack, slack in main, slack after Restore: %s, want %s", v.name, got, v.want)
		}
	}
}

// runWithSlack runs bin from a thread whose timer slack is ns (a child
// inherits its parent thread's) and returns its output.
func runWithSlack(bin string, ns uintptr) (string, error) {
	type result struct {
		out string
		err error
	}
	ch := make(chan result)
	go func() {
		// The thread ends with this goroutine, locked: nothing else
		// runs with its slack.
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_TIMERSLACK, ns, 0, 0, 0); err != nil {
			ch <- result{"", fmt.Errorf("set timer slack: %w", err)}
			return
		}
		out, err := exec.Command(bin).Output()
		ch <- result{string(out), err}
	}()
	r := <-ch
	return r.out, r.err
}

// TestRestoreThreads builds a program with the entry point whose init has
// the runtime start threads before main: idle threads with the raised
// slack are there before RestoreThreads (the control), and none after.
func TestRestoreThreads(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("the entry point exists for amd64 and arm64, not %s", runtime.GOARCH)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the probe with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "threads")
	build := exec.Command(gobin, "build", "-buildvcs=false", "-ldflags=-E=_rt0_moat", "-o", bin, "./testdata/threads")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := runWithSlack(bin, 50000)
	if err != nil {
		t.Fatal(err)
	}
	var linked bool
	var before, after int
	if _, err := fmt.Sscan(out, &linked, &before, &after); err != nil || !linked || before == 0 || after != 0 {
		t.Errorf("linked, idle threads with the raised slack before RestoreThreads and after: %q, want true, some, 0", strings.TrimSpace(out))
	}
}
