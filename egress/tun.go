package egress

import "net/netip"

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

// stopper is a served TUN device, which Close stops.
type stopper interface{ stop() }
