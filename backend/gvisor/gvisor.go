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

// Capabilities: memory and CPU limits where this caller can make cgroups
// (the sandbox's runsc processes, which do all its work, run in one);
// never a process limit, nor Landlock (see Unsupported).
func (*Backend) Capabilities() backend.Capabilities { return capabilities() }

// pidsWhy is why the gvisor backend has no process limit.
const pidsWhy = "the gvisor backend has no process limit: the sandbox's processes are the sentry's, and a host cgroup's pids limit would count the sentry's threads instead (--isolation native has one)"

// NoTUN says why a gvisor sandbox has no TUN device (transparent
// egress): the sandbox package then runs it with the proxy alone.
func (*Backend) NoTUN() string {
	return "the gvisor backend: the sandbox's network is gVisor's own, with loopback only"
}
