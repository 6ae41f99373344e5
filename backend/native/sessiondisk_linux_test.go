package native_test

import (
	"context"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
)

// TestSessionDiskLimitReported: a session's command that fails once it
// has filled the session's disk limit, with bytes or with empty files,
// is reported with cause disk, as a run's is; each session command's
// status used to say only exit. A command that starts with the limit
// already reached is not blamed for it. The control: a file within the
// limit.
func TestSessionDiskLimitReported(t *testing.T) {
	s := spec(t, t.TempDir(), "/bin/true")
	s.Limits.DiskBytes = 4 << 20
	inst, err := (&native.Backend{}).Create(context.Background(), s, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Destroy(context.Background())
	if out, st := execOut(t, inst, s, backend.ProcessSpec{}, "sh", "-c", "head -c 1M /dev/zero > /tmp/small && rm /tmp/small && echo ok"); st.Cause != backend.CauseExit || out != "ok\n" {
		t.Fatalf("control, 1 MiB: %+v %q", st, out)
	}
	for name, script := range map[string]string{
		"bytes": "head -c 10M /dev/zero > /tmp/big",
		"files": "i=0; while [ $i -lt 100000 ]; do : > /tmp/f$i || exit 1; i=$((i+1)); done",
	} {
		out, st := execOut(t, inst, s, backend.ProcessSpec{}, "sh", "-c", script)
		if st.Cause != backend.CauseDisk {
			t.Errorf("%s: %+v %q, want cause disk", name, st, out)
		}
		// The next command, started with the limit reached, did not
		// reach it: its failure is its own.
		if out, st := execOut(t, inst, s, backend.ProcessSpec{}, "sh", "-c", "exit 3"); st.Cause != backend.CauseExit || st.ExitCode != 3 {
			t.Errorf("%s: a failing command after the disk was full: %+v %q, want its own exit", name, st, out)
		}
		// Room again for the next case, and a control that the session
		// goes on.
		if out, st := execOut(t, inst, s, backend.ProcessSpec{}, "sh", "-c", "rm -f /tmp/big /tmp/f* && echo ok"); st.Cause != backend.CauseExit || out != "ok\n" {
			t.Fatalf("%s: cleaning up: %+v %q", name, st, out)
		}
	}
}
