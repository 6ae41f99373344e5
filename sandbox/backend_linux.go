package sandbox

import (
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/policy"
)

// defaultBackend is the backend p's [sandbox] isolation names.
func defaultBackend(p *policy.Policy, exitAfter bool) backend.Backend {
	if p.Sandbox.Isolation == policy.IsolationGVisor {
		return &gvisor.Backend{Runsc: p.Sandbox.Runsc}
	}
	// The caller that exits after Run is the CLI, which runs one sandbox
	// and never ends a goroutine locked to its thread (see
	// Request.ExitAfter).
	return &native.Backend{ExitAfter: exitAfter, NoLockedExits: exitAfter, OneAtATime: exitAfter}
}
