package native_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/internal/proctest"
)

// hostCost is the Go heap and goroutine stacks this process holds, after
// a collection, and its threads.
func hostCost(t *testing.T) (mem uint64, threads int) {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse, proctest.Threads(t)
}

// TestIdleSessionHoldsLittle: an idle session with exec checks, after one
// command, holds little of the host's memory and no thread of its own:
// the answers' reader waits with no buffer, and the exec supervisor waits
// in the runtime's poller. (A 64 KiB buffer on the reader's stack made
// each session's goroutines hold over 128 KiB; a supervisor blocked in
// poll(2) held a thread each.) The command each ran is the control that
// the sessions and their checks work.
func TestIdleSessionHoldsLittle(t *testing.T) {
	const n = 8
	check := func(backend.ExecCall) error { return nil }
	mem0, thr0 := hostCost(t)
	for range n {
		s := spec(t, t.TempDir(), "/bin/true")
		inst, err := (&native.Backend{}).Create(context.Background(), s, backend.Stdio{CheckExec: check})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { inst.Destroy(context.Background()) })
		if out, st := execOut(t, inst, s, backend.ProcessSpec{}, "/bin/sh", "-c", "echo ok"); strings.TrimSpace(out) != "ok" || st.ExitCode != 0 {
			t.Fatalf("a command in the session: %q %+v", out, st)
		}
	}
	mem1, thr1 := hostCost(t)
	perSession := (int64(mem1) - int64(mem0)) / n
	t.Logf("per idle session: %d KiB of heap and stacks; %d more threads for %d sessions", perSession/1024, thr1-thr0, n)
	if perSession > 128<<10 {
		t.Errorf("each idle session holds %d KiB of the host's heap and stacks, want at most 128", perSession/1024)
	}
	if thr1-thr0 >= n {
		t.Errorf("%d idle sessions hold %d more threads", n, thr1-thr0)
	}
}
