package egress

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// hostAddrsMaxAge is how long the proxy trusts one reading of the host's
// addresses. Interfaces come and go (DHCP, VPNs, container bridges), so
// a reading must not last for the whole run; but reading them is a
// netlink dump (tens of microseconds, more with many interfaces), so a
// burst of connections shares one. A second bounds how long a new
// address can go unnoticed, and the sandbox cannot add addresses to the
// host's interfaces to race that second.
const hostAddrsMaxAge = time.Second

// hostAddrs is the proxy's last reading of the host's own addresses.
type hostAddrs struct {
	mu    sync.Mutex
	read  time.Time // zero until the first reading
	addrs []netip.Addr
	local []netip.Prefix // the destinations of the host's local routes
}

// hostAddrs returns the host's own addresses, for Rules.CheckAddr. They
// are read at the first connection, not when the proxy starts (a run that
// connects nowhere pays nothing, and starting a run stays as fast), and
// read again when the last reading is older than hostAddrsMaxAge.
// Concurrent callers wait for one reading. A failed reading is not kept:
// the connection fails, and the next one reads again.
func (p *Proxy) hostAddrs() ([]netip.Addr, []netip.Prefix, error) {
	h := &p.own
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.read.IsZero() && time.Since(h.read) < hostAddrsMaxAge {
		return h.addrs, h.local, nil
	}
	read := p.HostAddrs
	if read == nil {
		read = interfaceAddrs
	}
	addrs, err := read()
	if err != nil {
		return nil, nil, fmt.Errorf("read the host's addresses: %w", err)
	}
	local, err := localRoutes()
	if err != nil {
		return nil, nil, fmt.Errorf("read the host's local routes: %w", err)
	}
	// A new slice: callers still hold the last one, without the lock.
	fresh := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		fresh[i] = a.Unmap()
	}
	h.addrs, h.local, h.read = fresh, local, time.Now()
	return fresh, local, nil
}

// withLocal is own with a, or an IPv4 address a embeds, added where the
// host's local routes (local) say the host answers on it itself: an
// address on no interface but in a prefix an address of the loopback
// device was given with, or an AnyIP route's, reached a service on the
// host (found by a tester). own is not changed.
func withLocal(a netip.Addr, own []netip.Addr, local []netip.Prefix) []netip.Addr {
	_, v4s := embeddedIPv4(a)
	for _, x := range append([]netip.Addr{a}, v4s...) {
		if slices.Contains(own, x) {
			continue
		}
		for _, p := range local {
			if p.Contains(x) {
				own = append(slices.Clip(own), x)
				break
			}
		}
	}
	return own
}

// interfaceAddrs returns the addresses on the host's interfaces.
func interfaceAddrs() ([]netip.Addr, error) {
	ifas, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(ifas))
	for _, ifa := range ifas {
		if n, ok := ifa.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, a.Unmap())
			}
		}
	}
	return out, nil
}
