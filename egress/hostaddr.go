package egress

import (
	"fmt"
	"net"
	"net/netip"
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
}

// hostAddrs returns the host's own addresses, for Rules.CheckAddr. They
// are read at the first connection, not when the proxy starts (a run that
// connects nowhere pays nothing, and starting a run stays as fast), and
// read again when the last reading is older than hostAddrsMaxAge.
// Concurrent callers wait for one reading. A failed reading is not kept:
// the connection fails, and the next one reads again.
func (p *Proxy) hostAddrs() ([]netip.Addr, error) {
	h := &p.own
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.read.IsZero() && time.Since(h.read) < hostAddrsMaxAge {
		return h.addrs, nil
	}
	read := p.HostAddrs
	if read == nil {
		read = interfaceAddrs
	}
	addrs, err := read()
	if err != nil {
		return nil, fmt.Errorf("read the host's addresses: %w", err)
	}
	// A new slice: callers still hold the last one, without the lock.
	fresh := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		fresh[i] = a.Unmap()
	}
	h.addrs, h.read = fresh, time.Now()
	return fresh, nil
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
