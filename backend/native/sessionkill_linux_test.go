//go:build linux

package native_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/proctest"
)

// detach is a shell script that leaves two processes running outside
// its process group: sleep <marker>1 in a session of its own whose
// parent (the script) lives, and sleep <marker>2 started by a double
// fork, in a session whose leader has died, re-parented to init. Then
// it says "ready" and runs then.
func detach(marker, then string) string {
	return fmt.Sprintf(`setsid sh -c 'exec sleep %[1]s1' </dev/null >/dev/null 2>&1 &
sh -c 'setsid sh -c "sleep %[1]s2 & exit 0" </dev/null >/dev/null 2>&1 &'
i=0; until [ "$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | grep -o 'sleep %[1]s[12]' | sort -u | wc -l)" = 2 ]; do
  i=$((i+1)); [ $i -lt 500 ] || exit 9; sleep 0.01
done
echo ready >&2
%[2]s`, marker, then)
}

// TestSessionLimitKillsDetached: a command ended at its wall clock or
// its output limit is ended whole: what it started in sessions of its
// own dies with it: one whose parent lives (setsid), and one whose
// parents have died (a double fork), which only the host's record of
// each setsid tells apart from another command's, in a session whose
// execs are checked and in one whose are not. The control: the same
// processes left by a command that ends by itself live on, and so does
// a plain background process.
func TestSessionLimitKillsDetached(t *testing.T) {
	for _, checked := range []bool{false, true} {
		t.Run(fmt.Sprintf("checked=%v", checked), func(t *testing.T) {
			var inst backend.Instance
			var s *backend.Spec
			if checked {
				s, inst = checkedSession(t, &execLog{})
			} else {
				inst, s = session(t)
			}
			base := fmt.Sprintf("%d%d", 7000+os.Getpid()%1000, time.Now().UnixNano()%100000)
			find := func(m string) func() []int { return func() []int { return proctest.Find("sleep " + m) } }

			// The control first: a command that ends by itself.
			ctl := base + "0"
			out, st := execOut(t, inst, s, backend.ProcessSpec{}, "/bin/sh", "-c", detach(ctl, "sleep 30 </dev/null >/dev/null 2>&1 & echo bg >&2"))
			if st.Cause != backend.CauseExit || st.ExitCode != 0 {
				t.Fatalf("control: %q, cause %s, exit %d", out, st.Cause, st.ExitCode)
			}
			time.Sleep(300 * time.Millisecond)
			for _, n := range []string{"1", "2"} {
				if len(find(ctl+n)()) == 0 {
					t.Errorf("control: sleep %s%s is gone after its command ended by itself", ctl, n)
				}
			}

			for i, c := range []struct {
				cause backend.Cause
				ps    backend.ProcessSpec
				then  string
			}{
				{backend.CauseTimeout, backend.ProcessSpec{Wall: 3 * time.Second}, "while :; do sleep 0.05; done"},
				{backend.CauseOutput, backend.ProcessSpec{Output: 64 << 10}, "sleep 0.2; yes"},
			} {
				m := fmt.Sprintf("%s%d", base, i+1)
				out, st := execOut(t, inst, s, c.ps, "/bin/sh", "-c", detach(m, c.then))
				if st.Cause != c.cause {
					t.Fatalf("%s: cause %s, exit %d, want %s; output %.200q", c.cause, st.Cause, st.ExitCode, c.cause, out)
				}
				for _, n := range []string{"1", "2"} {
					if left := proctest.Gone(find(m+n), 5*time.Second); len(left) > 0 {
						t.Errorf("%s: sleep %s%s (pids %v) outlived its command", c.cause, m, n, left)
					}
				}
			}

			// The control's processes, another command's, live on, and
			// the session still runs commands.
			for _, n := range []string{"1", "2"} {
				if len(find(ctl+n)()) == 0 {
					t.Errorf("sleep %s%s, the control's, was killed with another command", ctl, n)
				}
			}
			if out, st := execOut(t, inst, s, backend.ProcessSpec{}, "echo", "still"); out != "still\n" || st.Cause != backend.CauseExit {
				t.Errorf("after the kills: %q, cause %s", out, st.Cause)
			}
		})
	}
}
