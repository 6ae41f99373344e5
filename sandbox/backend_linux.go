package sandbox

import (
	"path/filepath"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/policy"
)

// defaultBackend is the backend p's [sandbox] isolation names.
func defaultBackend(p *policy.Policy, exitAfter bool) backend.Backend {
	if p.Sandbox.Isolation == policy.IsolationGVisor {
		// runsc is run long after a trusted policy's check (a session's
		// commands, the whole session later): it is checked again
		// before each start, as a secret's program is, and what runs is
		// a copy of the bytes the trust check hashed, not the file a
		// swap right after that check could replace.
		return &gvisor.Backend{Runsc: p.Sandbox.Runsc, Check: func(string) error { return p.VerifyPrograms() },
			Checked: func(runsc string) (string, bool) { return p.CheckedDigest(filepath.Clean(runsc)) }}
	}
	// The caller that exits after Run is the CLI, which runs one sandbox
	// and never ends a goroutine locked to its thread (see
	// Request.ExitAfter).
	return &native.Backend{ExitAfter: exitAfter, NoLockedExits: exitAfter, OneAtATime: exitAfter}
}
