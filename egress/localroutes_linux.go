//go:build linux

package egress

import (
	"fmt"
	"net/netip"
	"unsafe"

	"syscall"
)

// localRoutes returns the destinations of the host's local routes, of
// every routing table: the prefixes the host answers on itself. An
// address with a prefix on the loopback device, or an AnyIP route
// (`ip route add local 192.0.2.0/24 dev lo`), makes the host answer on
// the whole prefix, not only on the addresses its interfaces list.
func localRoutes() ([]netip.Prefix, error) {
	b, err := syscall.NetlinkRIB(syscall.RTM_GETROUTE, syscall.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("netlink route dump: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return nil, fmt.Errorf("netlink route dump: %w", err)
	}
	var out []netip.Prefix
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Type != syscall.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg {
			continue
		}
		rt := (*syscall.RtMsg)(unsafe.Pointer(&m.Data[0]))
		if rt.Type != syscall.RTN_LOCAL {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(m)
		if err != nil {
			continue
		}
		for _, a := range attrs {
			if a.Attr.Type != syscall.RTA_DST {
				continue
			}
			if addr, ok := netip.AddrFromSlice(a.Value); ok {
				if p, err := addr.Unmap().Prefix(int(rt.Dst_len)); err == nil {
					out = append(out, p)
				}
			}
		}
	}
	return out, nil
}
