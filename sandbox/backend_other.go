//go:build !linux

package sandbox

import "github.com/moatbox/moat/backend"

// defaultBackend is nil: moat runs sandboxes on Linux only.
func defaultBackend(bool) backend.Backend { return nil }
