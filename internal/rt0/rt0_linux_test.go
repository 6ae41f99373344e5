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
// slack are there before RestoreThreads (the control), and none of them
// has it after. (Threads made later may: those sysmon makes take its
// slack, which stays raised.)
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
	// RestoreThreads reaches the threads it finds, and the runtime may
	// start or park one in the same instant (OnThreads goes round a
	// bounded number of times): on a loaded machine one run in many
	// leaves one thread unreached. A few tries tell that from a
	// RestoreThreads that does nothing, which leaves every one of them.
	var outs []string
	for try := 0; try < 3; try++ {
		out, err := runWithSlack(bin, 50000)
		if err != nil {
			t.Fatal(err)
		}
		var linked bool
		var before, after int
		if _, err := fmt.Sscan(out, &linked, &before, &after); err == nil && linked && before > 0 && after == 0 {
			return
		}
		outs = append(outs, strings.TrimSpace(out))
	}
	t.Errorf("linked, idle threads with the raised slack before RestoreThreads, and of those after, in each try: %q, want true, some, 0", outs)
}

// TestPrefault builds a program with the entry point and starts it under
// its own name: the entry point must have pre-faulted its start (all of
// its code resident at main; 16 pages of .bss written without a page
// fault). Started as one of moat's helpers (argv[0] "moat-…"), and built
// without the entry point, the same program must take a fault per page of
// .bss (the control: the probe sees faults). The heap ahead is logged, not
// checked: the kernel maps only what part of it the runtime has mapped,
// which depends on where the randomised heap starts, and the control's
// share depends on the allocator's layout.
func TestPrefault(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the entry point pre-faults on amd64 only, not %s", runtime.GOARCH)
	}
	if !populateWorks() {
		t.Skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14): the entry point's pre-fault does nothing here")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the probe with: %v", err)
	}
	dir := t.TempDir()
	build := func(name, ldflags string) string {
		bin := filepath.Join(dir, name)
		cmd := exec.Command(gobin, "build", "-buildvcs=false", "-ldflags="+ldflags, "-o", bin, "./testdata/prefault")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		return bin
	}
	with, without := build("with", "-E=_rt0_moat"), build("without", "")
	for _, v := range []struct {
		name, bin, arg0 string
		prefaulted      bool
	}{
		{"under its own name", with, "", true},
		{"as a helper", with, "moat-sandbox-init", false},
		{"without the entry point", without, "", false},
	} {
		cmd := exec.Command(v.bin)
		if v.arg0 != "" {
			cmd.Args[0] = v.arg0
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		var prefaulted, resident bool
		var heap, data int
		if _, err := fmt.Sscan(string(out), &prefaulted, &heap, &data, &resident); err != nil {
			t.Fatalf("%s: output %q: %v", v.name, out, err)
		}
		t.Logf("%s: pre-faulted %v; heap ahead %d%% resident; faults for 16 pages of .bss %d; code wholly resident %v", v.name, prefaulted, heap, data, resident)
		switch {
		case prefaulted != v.prefaulted:
			t.Errorf("%s: pre-faulted %v, want %v", v.name, prefaulted, v.prefaulted)
		case v.prefaulted && (data > 2 || !resident):
			t.Errorf("%s: %d faults for 16 pages of .bss, code wholly resident %v; want none and true", v.name, data, resident)
		case !v.prefaulted && data < 12:
			t.Errorf("%s: %d faults for 16 pages of .bss; want about a fault a page (else the probe does not see faults)", v.name, data)
		}
	}
}

// populateWorks reports whether the kernel knows MADV_POPULATE_WRITE.
func populateWorks() bool {
	b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return false
	}
	defer unix.Munmap(b)
	return unix.Madvise(b, unix.MADV_POPULATE_WRITE) == nil
}
