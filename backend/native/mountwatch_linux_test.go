package native

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
)

// TestUnescapeMountinfo: a mount point with a space, a tab, a newline or a
// backslash in its name reads as the path the Spec names (a protection
// misread would fail its watch's start); the control, a plain path and a
// backslash not followed by three octal digits, is left as it is.
func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/w/my\040dir/.git/config`: "/w/my dir/.git/config",
		`/w/a\011b\012c\134d`:      "/w/a\tb\nc\\d",
		"/w/plain":                 "/w/plain",
		`/w/x\09`:                  `/w/x\09`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestWatchOfAnEndedSandbox: a command that ends at once can take init
// with it before the host reads that it started; the watch of a mount
// table whose process has exited (its namespace gone, the table reading
// as EINVAL) has nothing to watch, and is not a failure of the run (found
// as a flaky "watch the protections: invalid argument"). The control: a
// live process's table is watched.
func TestWatchOfAnEndedSandbox(t *testing.T) {
	spec := &backend.Spec{Mounts: []backend.Mount{{Kind: backend.MountReadOnly, Target: "/"}}}
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Wait4(pid, nil, 0, nil)
	// A zombie, not only ended: a task whose exit has just begun may still
	// hold its namespace, and a watch of it then starts (and ends with it).
	for !zombie(pid) {
		time.Sleep(time.Millisecond)
	}
	if !ended(pid) {
		t.Error("a zombie has not ended")
	}
	if stop, err := watchMounts(pid, spec, func(string) {}); err != nil || stop != nil {
		t.Errorf("the watch of an ended process: %v (stop %v)", err, stop != nil)
	}

	live := exec.Command("sleep", "10")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer live.Process.Kill()
	if ended(live.Process.Pid) {
		t.Error("a live process ended")
	}
	stop, err := watchMounts(live.Process.Pid, spec, func(string) {})
	if err != nil || stop == nil {
		t.Fatalf("the watch of a live process: %v", err)
	}
	stop()
}

// zombie says whether process pid has exited and is not yet reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := bytes.LastIndexByte(b, ')')
	return err == nil && i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// TestEndedStat: a task whose exit has begun (PF_EXITING) has already
// dropped its mount namespace while its state still reads running, so it
// counts as ended, as a zombie does; the control, a live task with other
// flags, and a comm holding ") Z", does not.
func TestEndedStat(t *testing.T) {
	for stat, want := range map[string]bool{
		"42 (sh) R 1 42 42 0 -1 4194564 0 0":        true,  // PF_EXITING|PF_FORKNOEXEC|...
		"42 (sh) Z 1 42 42 0 -1 4194560 0 0":        true,  // a zombie
		"42 (sh) S 1 42 42 0 -1 4194560 0 0":        false, // sleeping, not exiting
		"42 (a) Z 1 (b) S 1 42 42 0 -1 64 0 0":      false, // comm with ") Z" in it
		"42 (a) Z 1 (b) R 1 42 42 0 -1 4194308 0 0": true,
		"42 (sh) S": false,
	} {
		if got := endedStat([]byte(stat)); got != want {
			t.Errorf("%q: %v, want %v", stat, got, want)
		}
	}
}
