package gvisor_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/backendtest"
	"github.com/moatbox/moat/backend/gvisor"
)

// TestProtectedSourceSwappedAfterCheck: a pinned directory and a
// protected file in it, swapped for a link to a directory outside the
// workspace after moat checked them and before runsc starts (what
// another sandbox of the workspace did, racing, found by a tester: the
// run read and wrote the host's files the link led to), are mounted from
// what moat opened: the sandbox sees the workspace's own files, or the
// run fails, and the directory outside stays out of reach. The control:
// the same run without the swap reads the protected file and cannot
// write it.
func TestProtectedSourceSwappedAfterCheck(t *testing.T) {
	runsc := usable(t)
	victim := t.TempDir()
	os.Chmod(victim, 0o777)
	os.WriteFile(filepath.Join(victim, "genuine"), []byte("VICTIM-SECRET\n"), 0o644)
	for _, swap := range []bool{false, true} {
		ws := backendtest.Workspace(t)
		cargo := filepath.Join(ws, ".cargo")
		os.Mkdir(cargo, 0o755)
		os.WriteFile(filepath.Join(cargo, "genuine"), []byte("WORKSPACE-FILE\n"), 0o644)
		os.Chown(cargo, 1000, 1000)
		os.Chown(filepath.Join(cargo, "genuine"), 1000, 1000)
		script := `cat .cargo/genuine; echo x > .cargo/genuine && echo WROTE-PROTECTED; echo y > .cargo/new && echo WROTE-NEW; cat ` + victim + `/genuine 2>/dev/null; true`
		spec := backendtest.BaseSpec(ws, "/bin/sh", "-c", script)
		spec.Mounts = append(spec.Mounts,
			backend.Mount{Kind: backend.MountPin, Target: cargo},
			backend.Mount{Kind: backend.MountReadOnly, Target: filepath.Join(cargo, "genuine")})
		gvisor.SetAfterBundle(nil)
		if swap {
			gvisor.SetAfterBundle(func(string) {
				os.Rename(cargo, cargo+"-aside")
				os.Symlink(victim, cargo)
			})
		}
		var out, errb bytes.Buffer
		st, err := (&gvisor.Backend{Runsc: runsc}).Run(context.Background(), spec, backend.Stdio{Stdout: &out, Stderr: &errb})
		gvisor.SetAfterBundle(nil)
		if !swap {
			if err != nil || st.ExitCode != 0 || !strings.Contains(out.String(), "WORKSPACE-FILE") || strings.Contains(out.String(), "WROTE-PROTECTED") || !strings.Contains(out.String(), "WROTE-NEW") {
				t.Fatalf("control: %v %+v\n%s%s", err, st, out.String(), errb.String())
			}
			continue
		}
		t.Logf("swapped: %v\n%s%s", err, out.String(), errb.String())
		if strings.Contains(out.String(), "VICTIM-SECRET") {
			t.Errorf("the sandbox read the directory the link led to:\n%s", out.String())
		}
		if _, err := os.Stat(filepath.Join(victim, "new")); err == nil {
			t.Error("the sandbox wrote in the directory the link led to")
		}
		if b, _ := os.ReadFile(filepath.Join(victim, "genuine")); string(b) != "VICTIM-SECRET\n" {
			t.Errorf("the directory the link led to changed: %q", b)
		}
	}
}

// TestProtectedSpecialFileRefused: a named pipe or a socket where a
// protected path is (a sandbox could leave a FIFO at .envrc) is refused
// at once, naming it: runsc's gofer opened the FIFO to bind it and waited
// for a writer, hanging every later run until its wall limit (found by a
// tester). The control: a regular file there runs (TestProtectedSourceSwappedAfterCheck).
func TestProtectedSpecialFileRefused(t *testing.T) {
	runsc := usable(t)
	for _, kind := range []string{"fifo", "socket"} {
		ws := backendtest.Workspace(t)
		p := filepath.Join(ws, ".envrc")
		switch kind {
		case "fifo":
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		case "socket":
			l, err := net.Listen("unix", p)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
		}
		spec := backendtest.BaseSpec(ws, "/bin/true")
		spec.Mounts = append(spec.Mounts, backend.Mount{Kind: backend.MountReadOnly, Target: p})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		_, err := (&gvisor.Backend{Runsc: runsc}).Run(ctx, spec, backend.Stdio{})
		cancel()
		if err == nil || !strings.Contains(err.Error(), ".envrc") || !strings.Contains(err.Error(), "binds only files and directories") {
			t.Errorf("%s at a protected path: %v, want a refusal naming it", kind, err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("%s: the refusal took %v", kind, d)
		}
	}
}

// TestGateFailureNamed: when the gate cannot stage a protected path (its
// mount point gone), the run fails with the gate's own reason, not with
// a guess that runsc is not gVisor's (what it said before). The control:
// the same run with the mount point in place succeeds.
func TestGateFailureNamed(t *testing.T) {
	runsc := usable(t)
	for _, remove := range []bool{false, true} {
		ws := backendtest.Workspace(t)
		p := filepath.Join(ws, ".envrc")
		os.WriteFile(p, []byte("x\n"), 0o644)
		spec := backendtest.BaseSpec(ws, "/bin/cat", ".envrc")
		spec.Mounts = append(spec.Mounts, backend.Mount{Kind: backend.MountReadOnly, Target: p})
		gvisor.SetAfterBundle(func(stage string) {
			if remove {
				os.Remove(filepath.Join(stage, "0"))
			}
		})
		st, err := (&gvisor.Backend{Runsc: runsc}).Run(context.Background(), spec, backend.Stdio{})
		gvisor.SetAfterBundle(nil)
		if !remove {
			if err != nil || st.ExitCode != 0 {
				t.Fatalf("control: %v %+v", err, st)
			}
			continue
		}
		t.Logf("mount point gone: %v", err)
		if err == nil || !strings.Contains(err.Error(), "stage the protected paths") || strings.Contains(err.Error(), "pid-file") {
			t.Errorf("mount point gone: %v, want the gate's reason", err)
		}
	}
}

// TestProtectionReplacedOnHost: a protected file the host replaces while
// the sandbox runs (a rename over it, as git config and sed -i save) ends
// the run, reason protection, naming it; before, the sandbox saw the new
// file through the workspace and wrote it where the command's uid could
// (tried). The control: left alone, the file stays read-only and the run
// ends by itself.
func TestProtectionReplacedOnHost(t *testing.T) {
	runsc := usable(t)
	for _, replace := range []bool{false, true} {
		ws := backendtest.Workspace(t)
		p := filepath.Join(ws, ".envrc")
		os.WriteFile(p, []byte("old\n"), 0o644)
		os.Chown(p, 1000, 1000)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 400 {
				if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
					break
				}
				time.Sleep(25 * time.Millisecond)
			}
			if replace {
				os.WriteFile(p+".new", []byte("new\n"), 0o644)
				os.Chown(p+".new", 1000, 1000)
				os.Rename(p+".new", p)
			}
		}()
		spec := backendtest.BaseSpec(ws, "/bin/sh", "-c", `touch started; i=0; while [ $i -lt 15 ]; do echo evil >> .envrc 2>/dev/null && echo WROTE; sleep 0.2; i=$((i+1)); done`)
		spec.Mounts = append(spec.Mounts, backend.Mount{Kind: backend.MountReadOnly, Target: p})
		var out bytes.Buffer
		st, err := (&gvisor.Backend{Runsc: runsc}).Run(context.Background(), spec, backend.Stdio{Stdout: &out, Stderr: &out})
		<-done
		if err != nil {
			t.Fatalf("replaced %v: %v\n%s", replace, err, out.String())
		}
		if !replace {
			if st.Cause != backend.CauseExit || strings.Contains(out.String(), "WROTE") {
				t.Errorf("control: %+v %q", st, out.String())
			}
			continue
		}
		named := false
		for _, d := range st.Denials {
			named = named || d.Layer == backend.LayerMount && d.What == p
		}
		if st.Cause != backend.CauseProtection || !named {
			t.Errorf("replaced on the host: cause %q, denials %+v, output %q", st.Cause, st.Denials, out.String())
		}
		if strings.Contains(out.String(), "WROTE") {
			t.Logf("the command reached the new file before the kill: %q", out.String())
		}
	}
}
