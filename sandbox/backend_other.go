//go:build !linux

package sandbox

import (
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
)

// defaultBackend is nil: moat runs sandboxes on Linux only.
func defaultBackend(*policy.Policy, bool) backend.Backend { return nil }
