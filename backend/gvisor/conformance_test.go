package gvisor_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/moatbox/moat/backend/backendtest"
	"github.com/moatbox/moat/backend/gvisor"
)

// usable returns the runsc to test with, or skips the test saying why
// there is none here: not found (not built on this machine: the QEMU
// guest has no Go and no cache), not root (rootless runsc has no network
// isolation), or it does not run.
func usable(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("gvisor: runsc runs sandboxes for root only here (uid %d): rootless runsc has no network isolation; the run as root tests it", os.Geteuid())
	}
	runsc, err := gvisor.Find("")
	if err != nil {
		t.Skipf("gvisor: %v", err)
	}
	if out, err := exec.Command(runsc, "--version").CombinedOutput(); err != nil {
		t.Skipf("gvisor: %s --version: %v %s", runsc, err, out)
	}
	return runsc
}

// TestConformance runs the suite every backend passes.
func TestConformance(t *testing.T) {
	runsc := usable(t)
	fmt.Println("runsc:", runsc)
	backendtest.Run(t, &gvisor.Backend{Runsc: runsc}, backendtest.Options{Overlay: true, HostNetwork: true})
}

// TestSessionConformance runs the session suite every backend with a
// lifecycle passes.
func TestSessionConformance(t *testing.T) {
	runsc := usable(t)
	backendtest.RunSession(t, &gvisor.Backend{Runsc: runsc}, backendtest.SessionOptions{HostNetwork: true})
}

// BenchmarkLifecycle: session create and exec latency (bench/gvisor.sh).
func BenchmarkLifecycle(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("gvisor: runsc runs sandboxes for root only here")
	}
	runsc, err := gvisor.Find("")
	if err != nil {
		b.Skip(err)
	}
	backendtest.BenchmarkLifecycle(b, &gvisor.Backend{Runsc: runsc})
}
