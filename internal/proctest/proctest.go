// Package proctest helps tests look for processes on the host, to check
// that nothing a sandbox started outlives it. It only reads /proc.
package proctest

import (
	"fmt"
	"os"
	"strings"
)

// Find returns the pids of host processes whose command line (arguments
// joined by spaces) contains s.
func Find(s string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			out = append(out, pid)
		}
	}
	return out
}
