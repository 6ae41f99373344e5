package native

import (
	"os/exec"
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
	for !ended(pid) {
		time.Sleep(time.Millisecond)
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
