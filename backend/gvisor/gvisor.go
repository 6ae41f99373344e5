package gvisor

import (
	"github.com/moatbox/moat/backend"
)

// Backend runs Specs under runsc. The zero value finds runsc with
// Find(""). Runs may be concurrent: each has its own bundle and runsc
// state directory.
type Backend struct {
	// Runsc is the runsc binary; empty means Find("").
	Runsc string
}

// Name is "gvisor".
func (*Backend) Name() string { return "gvisor" }

// Capabilities: no cgroup limits and no Landlock (see Unsupported).
func (*Backend) Capabilities() backend.Capabilities {
	const why = "the gvisor backend does not apply cgroup limits yet (--isolation native does)"
	return backend.Capabilities{MemoryWhy: why, PidsWhy: why, CPUWhy: why}
}
