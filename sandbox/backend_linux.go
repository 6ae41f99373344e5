package sandbox

import (
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
)

func defaultBackend(exitAfter bool) backend.Backend {
	// The caller that exits after Run is the CLI, which runs one sandbox
	// and never ends a goroutine locked to its thread (see
	// Request.ExitAfter).
	return &native.Backend{ExitAfter: exitAfter, NoLockedExits: exitAfter, OneAtATime: exitAfter}
}
