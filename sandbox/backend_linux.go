package sandbox

import (
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
)

func defaultBackend(exitAfter bool) backend.Backend {
	return &native.Backend{ExitAfter: exitAfter}
}
