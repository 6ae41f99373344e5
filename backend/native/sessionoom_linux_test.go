package native_test

import (
	"context"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
)

// TestSessionMemoryLimitOnTmpfs: a session's command that fills /tmp
// past the session's memory limit is the one killed, reported as
// memory, and the session goes on. The OOM killer picks the process with
// the most resident memory (bar oom_score_adj), and a tmpfs writer's
// pages are in no process: it used to pick the session's init, a Go
// program, which ended the session and every command in it, reported as
// killed. The control: a file within the limit.
func TestSessionMemoryLimitOnTmpfs(t *testing.T) {
	caps := (&native.Backend{}).Capabilities()
	if !caps.Memory {
		t.Skipf("no memory limit here: %s", caps.MemoryWhy)
	}
	s := spec(t, t.TempDir(), "/bin/true")
	s.Limits.MemoryBytes = 48 << 20
	inst, err := (&native.Backend{}).Create(context.Background(), s, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Destroy(context.Background())
	if out, st := execOut(t, inst, s, backend.ProcessSpec{}, "sh", "-c", "head -c 8M /dev/zero > /tmp/small && echo ok"); st.Cause != backend.CauseExit || out != "ok\n" {
		t.Fatalf("control, 8 MiB: %+v %q", st, out)
	}
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		// The file is unlinked once open, so that its pages go with the
		// process that holds it, which is small. One process holds it
		// (the shell execs the writer): were the shell to hold it too
		// and die first, init would wake to reap it and could need a
		// page while the writer, killed next, is past giving its
		// memory back but still holds the file, and the OOM killer
		// would then find only init (see docs/security.md).
		fill := "exec 3>" + dir + "/big && rm " + dir + "/big && exec head -c 100M /dev/zero >&3"
		out, st := execOut(t, inst, s, backend.ProcessSpec{}, "sh", "-c", fill)
		if st.Cause != backend.CauseMemory {
			t.Errorf("%s: %+v %q, want cause memory", dir, st, out)
		}
		select {
		case <-inst.Done():
			t.Fatalf("%s: the session ended", dir)
		default:
		}
		if out, st := execOut(t, inst, s, backend.ProcessSpec{}, "echo", "alive"); out != "alive\n" {
			t.Fatalf("%s: the session no longer runs commands: %+v %q", dir, st, out)
		}
	}
	// A command may lower its score back to init's, and init is then
	// the victim: the session ends, but the command's status still says
	// that the memory limit ended it.
	out, st := execOut(t, inst, s, backend.ProcessSpec{}, "sh", "-c", "echo 0 > /proc/self/oom_score_adj && exec 3>/tmp/big && rm /tmp/big && head -c 100M /dev/zero >&3")
	if st.Cause != backend.CauseMemory {
		t.Errorf("a command that lowered its score: %+v %q, want cause memory", st, out)
	}
}
