package gvisor_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/backendtest"
	"github.com/moatbox/moat/backend/gvisor"
)

// cgroupsUsable skips the test unless this host lets moat make cgroups
// with the memory and CPU controllers.
func cgroupsUsable(t *testing.T, be *gvisor.Backend) {
	t.Helper()
	c := be.Capabilities()
	if !c.Memory || !c.CPU {
		t.Skipf("gvisor: no cgroup limits here: memory: %s; cpu: %s", c.MemoryWhy, c.CPUWhy)
	}
}

// cgroupLeft fails the test if a cgroup of the run is left.
func cgroupLeft(t *testing.T, id string) {
	t.Helper()
	for _, pat := range []string{"/sys/fs/cgroup/moat-", "/sys/fs/cgroup/*/moat-", "/sys/fs/cgroup/*/*/moat-", "/sys/fs/cgroup/*/*/*/moat-", "/sys/fs/cgroup/*/*/*/*/moat-"} {
		if left, _ := filepath.Glob(pat + id); len(left) > 0 {
			t.Errorf("cgroups left: %v", left)
		}
	}
}

// TestMemoryLimit: under a memory limit, a run that fills the sandbox's
// memory (its /tmp is the sentry's memory) ends with cause memory; the
// same run writing a little (the control) exits 0. A session under the
// limit ends the same way. No cgroup is left.
func TestMemoryLimit(t *testing.T) {
	be := &gvisor.Backend{Runsc: usable(t)}
	cgroupsUsable(t, be)
	ws := backendtest.Workspace(t)
	fill := func(mib int) *backend.Spec {
		s := backendtest.BaseSpec(ws, "/bin/sh", "-c", "head -c "+strconv.Itoa(mib)+"m /dev/zero > /tmp/fill")
		s.Limits.MemoryBytes = 256 << 20
		return s
	}
	s := fill(16)
	if st, err := be.Run(context.Background(), s, backend.Stdio{}); err != nil || st.Cause != backend.CauseExit || st.ExitCode != 0 {
		t.Fatalf("control: 16 MiB under a 256 MiB limit: %+v %v", st, err)
	}
	s = fill(1024)
	st, err := be.Run(context.Background(), s, backend.Stdio{})
	if err != nil || st.Cause != backend.CauseMemory {
		t.Errorf("1 GiB under a 256 MiB limit: %+v %v, want cause memory", st, err)
	}
	cgroupLeft(t, s.RunID)

	spec := backendtest.BaseSpec(ws)
	spec.Limits.MemoryBytes = 256 << 20
	in, err := be.Create(context.Background(), spec, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Destroy(context.Background())
	run := func(script string) *backend.ExitStatus {
		p, err := in.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"/bin/sh", "-c", script}, Env: spec.Env, Dir: ws}, backend.Stdio{})
		if err != nil {
			t.Fatal(err)
		}
		st, _ := p.Wait()
		return st
	}
	if st := run("head -c 16m /dev/zero > /tmp/fill"); st.Cause != backend.CauseExit || st.ExitCode != 0 {
		t.Fatalf("control: 16 MiB in a session under a 256 MiB limit: %+v", st)
	}
	if st := run("head -c 1024m /dev/zero > /tmp/fill"); st.Cause != backend.CauseMemory {
		t.Errorf("1 GiB in a session under a 256 MiB limit: %+v, want cause memory", st)
	}
	select {
	case <-in.Done():
	case <-time.After(10 * time.Second):
		t.Error("the session outlived its sentry")
	}
	cgroupLeft(t, spec.RunID)
}

// TestCPUQuota: a fixed amount of work under a quota of 0.2 CPUs takes
// several times as long as without one (the control).
func TestCPUQuota(t *testing.T) {
	be := &gvisor.Backend{Runsc: usable(t)}
	cgroupsUsable(t, be)
	ws := backendtest.Workspace(t)
	wall := func(cpus float64) time.Duration {
		s := backendtest.BaseSpec(ws, "/bin/sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
		s.Limits.CPUs = cpus
		st, err := be.Run(context.Background(), s, backend.Stdio{})
		if err != nil || st.ExitCode != 0 {
			t.Fatalf("cpus %g: %+v %v", cpus, st, err)
		}
		cgroupLeft(t, s.RunID)
		return st.Wall
	}
	free, limited := wall(0), wall(0.2)
	t.Logf("the same work: %v unlimited, %v under 0.2 CPUs", free, limited)
	if limited < 2*free {
		t.Errorf("under a quota of 0.2 CPUs the work took %v, against %v without one", limited, free)
	}
}
