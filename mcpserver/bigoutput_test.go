//go:build linux

package mcpserver_test

import (
	"runtime"
	"testing"
)

// TestRunCommandUnlimitedOutput: under a policy with no output limit,
// run_command keeps only the start and end of what a command writes: it
// kept all of it, growing the server's memory (the daemon's, for /mcp)
// for as long as the command wrote. The control: the result still shows
// the output's first and last lines and counts what was left out.
func TestRunCommandUnlimitedOutput(t *testing.T) {
	e := start(t, setup{policy: "[limits]\noutput = 0\n"})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	text := e.ok(t, "run_command", map[string]any{"command": "echo first; head -c 67108864 /dev/zero | tr '\\0' x; echo; echo last"},
		"exit code: 0", "first\n", "last\n", "(67108876 in all)")
	runtime.ReadMemStats(&after)
	if len(text) > 6000 {
		t.Errorf("a result of %d bytes", len(text))
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Errorf("the server allocated %d MiB for 64 MiB of output", grew>>20)
	}
}
