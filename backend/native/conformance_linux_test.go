package native_test

import (
	"testing"

	"github.com/moatbox/moat/backend/backendtest"
	"github.com/moatbox/moat/backend/native"
)

// TestConformance runs the suite every backend passes.
func TestConformance(t *testing.T) {
	backendtest.Run(t, &native.Backend{}, backendtest.Options{Overlay: true, HostNetwork: true, KilledUsage: true})
}

// TestSessionConformance runs the session suite every backend with a
// lifecycle passes.
func TestSessionConformance(t *testing.T) {
	backendtest.RunSession(t, &native.Backend{}, backendtest.SessionOptions{HostNetwork: true})
}

// BenchmarkLifecycle: session create and exec latency (bench/gvisor.sh
// compares it with the gvisor backend's).
func BenchmarkLifecycle(b *testing.B) {
	backendtest.BenchmarkLifecycle(b, &native.Backend{})
}
