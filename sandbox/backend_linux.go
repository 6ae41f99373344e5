package sandbox

import (
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
)

func defaultBackend() backend.Backend { return &native.Backend{} }
