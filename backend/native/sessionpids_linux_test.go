//go:build linux

package native_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/internal/cgroup"
)

// TestSessionPidsAreTheCommands: a session's pids limit is its commands':
// init's own threads (a Go program's) do not take from it, whether a
// cgroup or RLIMIT_NPROC enforces it. A command forks until refused and
// gets the limit, itself included (less the threads init makes after the
// session is ready); the cap still holds: it asks for more. The control:
// the same command under a limit twice as large gets twice as many, so
// the count is the limit's and not some other bound's. A fork bomb is
// still held to the limit, and leaves the session working. A limit of 3
// starts a session too: under a cgroup, init's threads took it all
// before the session was ready, and it ended (tried).
func TestSessionPidsAreTheCommands(t *testing.T) {
	const forks = `$| = 1; my $n = 0; for (1..200) { my $p = fork(); last unless defined $p; if ($p == 0) { sleep 5; exit 0 } $n++ } print "$n\n"; kill 'KILL', -$$;`
	for _, rlimit := range []bool{false, true} {
		t.Run(fmt.Sprintf("rlimit=%v", rlimit), func(t *testing.T) {
			if rlimit && !native.NprocPerUserns() {
				t.Skip("RLIMIT_NPROC is counted per user namespace only from Linux 5.14")
			}
			if !rlimit && !cgroup.Probe().Usable["pids"] {
				t.Skip("no pids cgroup here")
			}
			for _, limit := range []int64{3, 16, 32} {
				s := spec(t, t.TempDir(), "/bin/true")
				s.Limits.Pids, s.Limits.PidsRlimit = limit, rlimit
				inst, err := (&native.Backend{}).Create(context.Background(), s, backend.Stdio{})
				if err != nil {
					t.Fatal(err)
				}
				// A few commands first: init's threads are all there.
				for range 3 {
					execOut(t, inst, s, backend.ProcessSpec{}, "/bin/true")
				}
				out, _ := execOut(t, inst, s, backend.ProcessSpec{}, "/usr/bin/perl", "-e", forks)
				// A fork bomb is held to the limit, ended at its wall
				// clock, and the session runs commands after it. Every
				// task of the bomb forks on when a fork fails: a shell's
				// bomb ends on a failed fork of its own, which at a
				// limit of 3 can be its first (the tasks of the command
				// before, killed but not yet reaped, still count).
				_, st := execOut(t, inst, s, backend.ProcessSpec{Wall: 2 * time.Second}, "/usr/bin/perl", "-e", "while (1) { fork; select(undef, undef, undef, 0.01) }")
				if st.Cause != backend.CauseTimeout {
					t.Errorf("limit %d: the fork bomb ended by %s, want its wall clock", limit, st.Cause)
				}
				if still, st := execOut(t, inst, s, backend.ProcessSpec{}, "echo", "still"); still != "still\n" || st.Cause != backend.CauseExit {
					t.Errorf("limit %d: after the fork bomb: %q, %s", limit, still, st.Cause)
				}
				inst.Destroy(context.Background())
				n, err := strconv.Atoi(strings.TrimSpace(out))
				if err != nil {
					t.Fatalf("limit %d: %q", limit, out)
				}
				// A thread init's Go runtime makes after the session is
				// ready still counts against the commands (a documented
				// limit), as seen once in the emulated guest: two such
				// threads are let pass, not the many init holds when it
				// is ready (without spareInitTasks, a limit of 16 left
				// the command 7).
				if n+1 > int(limit) || n+1 < int(limit)-2 {
					t.Errorf("limit %d: the command held %d tasks, itself included; want the limit (or up to two fewer: init's later threads)", limit, n+1)
				} else if n+1 != int(limit) {
					t.Logf("limit %d: the command held %d tasks, itself included: init made %d threads after the session was ready", limit, n+1, int(limit)-n-1)
				}
			}
		})
	}
}
