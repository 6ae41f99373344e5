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
	// VnetHdr says the device was made with virtio-net headers and
	// checksum offload (IFF_VNET_HDR, TUN_F_CSUM; backend.TUN.VnetHdr):
	// each packet read or written begins with a struct virtio_net_hdr.
	// The stack then computes no checksum of the TCP segments it sends
	// (the header marks them partial, and the sandbox's kernel takes them
	// as checked) and checks none of the packets it receives (the
	// sandbox's kernel leaves them partial). Both ends are one host's
	// memory, where a checksum finds no corruption: it is a pass over
	// every byte on each side, for nothing.
	VnetHdr bool
}

// stopper is a served TUN device, which Close stops.
type stopper interface{ stop() }
