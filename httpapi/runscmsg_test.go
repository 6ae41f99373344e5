package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/sandbox"
)

// TestNoRunscScrubbed: a gVisor policy refused for want of runsc tells
// the tenant so, without the daemon's paths (runsc's message names where
// the daemon's user builds it); another refusal keeps its own text (the
// control).
func TestNoRunscScrubbed(t *testing.T) {
	s := &Server{}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("MOAT_RUNSC", "")
	t.Setenv("PATH", "")
	_, findErr := gvisor.Find("")
	if !strings.Contains(findErr.Error(), cache) {
		t.Fatalf("runsc's own message %q does not name where it is built: the test shows nothing", findErr)
	}
	for _, err := range []error{
		fmt.Errorf("%w: %w", sandbox.ErrRefused, findErr),
		fmt.Errorf("%w: refusing to run: gvisor isolation: %s", sandbox.ErrRefused, "runsc not found: build it with scripts/runsc.sh (into /root/.cache/moat/runsc-v1)"),
	} {
		e := s.apiError(err)
		if e.Code != client.CodeSandboxRefused || strings.Contains(e.Message, "/root") || strings.Contains(e.Message, cache) || !strings.Contains(e.Message, "no runsc") {
			t.Errorf("%v: %+v", err, e)
		}
	}
	if e := s.apiError(fmt.Errorf("%w: something else", sandbox.ErrRefused)); !strings.Contains(e.Message, "something else") {
		t.Errorf("another refusal: %+v", e)
	}
}
