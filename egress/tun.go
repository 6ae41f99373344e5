package egress

import (
	"net/netip"
	"time"
)

// TUNConfig is the addressing of a TUN device that Proxy.ServeTUN serves.
type TUNConfig struct {
	// MTU is the device's MTU.
	MTU int
	// DNS is the address the sandbox's resolver asks (UDP port 53).
	DNS netip.Addr
	// Names is where the addresses handed out for allowed names come
	// from, one per name for the whole run. A connection to an address in
	// Names is a connection to its name; one to an address of Names that
	// no name was given is refused.
	Names netip.Prefix
}

// dnsIdle is how long a DNS flow (one client socket) is kept without a
// query before its endpoint is closed.
const dnsIdle = 5 * time.Second

// Bounds on what a sandbox can make the TUN front end hold: DNS flows
// served at once (each a goroutine and an endpoint until idle), and UDP
// destinations reported refused (the first ones of a run; later ones are
// dropped without an event).
const (
	maxDNSFlows    = 64
	maxUDPReported = 256
)

// stopper is a served TUN device, which Close stops.
type stopper interface{ stop() }
