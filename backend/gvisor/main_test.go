package gvisor_test

import (
	"os"
	"testing"

	"github.com/moatbox/moat/backend/gvisor"
)

// TestMain lets the test binary be the forwarder and a session's init,
// bound into the sandbox as moat's own binary is.
func TestMain(m *testing.M) {
	gvisor.MaybeForward()
	os.Exit(m.Run())
}
