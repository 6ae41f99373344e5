//go:build !linux

package egress

import "net/netip"

// localRoutes is the host's local routes' destinations: only Linux's are
// read (moat runs sandboxes on Linux only).
func localRoutes() ([]netip.Prefix, error) { return nil, nil }
