package sandbox

import "github.com/moatbox/moat/backend"

// tunless is a backend that cannot give a sandbox a TUN device (gvisor:
// runsc's network is the sentry's own): NoTUN says why.
type tunless interface {
	NoTUN() string
}

// backendTUN leaves the TUN device out of a Spec whose backend cannot
// make one, and says so: the run has the proxy only, as where the host
// has no device. "" when the Spec keeps its device or has none.
func backendTUN(be backend.Backend, spec *backend.Spec) string {
	u, ok := be.(tunless)
	if !ok || spec.Network.TUN == nil {
		return ""
	}
	dropTUN(spec)
	return "network: no transparent egress (" + u.NoTUN() + "): only programs that use the proxy variables reach the network"
}
