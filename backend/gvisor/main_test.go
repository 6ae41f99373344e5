package gvisor_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/backendtest"
	"github.com/moatbox/moat/backend/gvisor"
)

// TestMain lets the test binary be the forwarder and a session's init,
// bound into the sandbox as moat's own binary is, and a caller that
// dies holding a session (TestSessionDiesWithCaller).
func TestMain(m *testing.M) {
	gvisor.MaybeForward()
	if ws := os.Getenv("MOAT_TEST_GVISOR_CALLER"); ws != "" {
		sessionCaller(ws)
	}
	os.Exit(m.Run())
}

// sessionCaller creates a session over ws, starts a command in it, says
// so and waits to be killed.
func sessionCaller(ws string) {
	spec := backendtest.BaseSpec(ws)
	spec.RunID = os.Getenv("MOAT_TEST_GVISOR_ID")
	if os.Getenv("MOAT_TEST_GVISOR_MEMORY") != "" {
		spec.Limits.MemoryBytes = 256 << 20
	}
	in, err := (&gvisor.Backend{}).Create(context.Background(), spec, backend.Stdio{})
	if err != nil {
		fmt.Println("create:", err)
		os.Exit(1)
	}
	if _, err := in.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"/bin/sleep", "4244.4244"}, Env: spec.Env, Dir: ws}, backend.Stdio{}); err != nil {
		fmt.Println("exec:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	select {}
}
