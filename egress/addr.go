package egress

import (
	"net/netip"
	"slices"
)

// addrRange is one range of addresses the proxy refuses, with what it is
// and where that is defined, for the explanation.
type addrRange struct {
	prefix netip.Prefix
	kind   string
	ref    string
}

func mustRanges(specs ...[3]string) []addrRange {
	out := make([]addrRange, len(specs))
	for i, s := range specs {
		out[i] = addrRange{netip.MustParsePrefix(s[0]), s[1], s[2]}
	}
	return out
}

// refused4 and refused6 are checked in order: the first match names the
// address (so the metadata address is named before link-local in general).
var refused4 = mustRanges(
	[3]string{"0.0.0.0/32", "unspecified address", "RFC 1122"},
	[3]string{"0.0.0.0/8", "this-network address", "RFC 791"},
	[3]string{"10.0.0.0/8", "private address", "RFC 1918"},
	[3]string{"100.64.0.0/10", "shared (CGNAT) address", "RFC 6598"},
	[3]string{"127.0.0.0/8", "loopback address", "RFC 1122"},
	[3]string{"169.254.169.254/32", "cloud metadata address", "link-local"},
	[3]string{"169.254.0.0/16", "link-local address", "RFC 3927"},
	[3]string{"172.16.0.0/12", "private address", "RFC 1918"},
	[3]string{"192.0.0.0/24", "IETF protocol address", "RFC 6890"},
	[3]string{"192.0.2.0/24", "documentation address", "RFC 5737"},
	[3]string{"192.168.0.0/16", "private address", "RFC 1918"},
	[3]string{"198.18.0.0/15", "benchmarking address", "RFC 2544"},
	[3]string{"198.51.100.0/24", "documentation address", "RFC 5737"},
	[3]string{"203.0.113.0/24", "documentation address", "RFC 5737"},
	[3]string{"224.0.0.0/4", "multicast address", "RFC 5771"},
	[3]string{"255.255.255.255/32", "broadcast address", "RFC 919"},
	[3]string{"240.0.0.0/4", "reserved address", "RFC 1112"},
)

var refused6 = mustRanges(
	[3]string{"::/128", "unspecified address", "RFC 4291"},
	[3]string{"::1/128", "loopback address", "RFC 4291"},
	[3]string{"::/96", "IPv4-compatible address", "RFC 4291, deprecated"},
	[3]string{"64:ff9b:1::/48", "local-use NAT64 address", "RFC 8215"},
	[3]string{"100::/64", "discard-only address", "RFC 6666"},
	[3]string{"2001:db8::/32", "documentation address", "RFC 3849"},
	[3]string{"fc00::/7", "unique local address", "RFC 4193"},
	[3]string{"fe80::/10", "link-local address", "RFC 4291"},
	[3]string{"fec0::/10", "site-local address", "RFC 3879"},
	[3]string{"ff00::/8", "multicast address", "RFC 4291"},
)

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	nat64L    = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215, local use
	siit      = netip.MustParsePrefix("::ffff:0:0:0/96") // RFC 2765
	sixToFour = netip.MustParsePrefix("2002::/16")
	teredo    = netip.MustParsePrefix("2001::/32")
	global6   = netip.MustParsePrefix("2000::/3")
)

// addrKind returns "" for an address the proxy may connect to, else what
// the address is, as a rule name: "private address 10.0.0.1 (RFC 1918)".
// IPv6 addresses that embed an IPv4 address (NAT64, SIIT, 6to4, Teredo) are
// refused when the embedded address would be; a local-use NAT64 address
// (64:ff9b:1::/48) is refused in any case, and names the embedded address
// that would be refused when there is one.
func addrKind(a netip.Addr) string {
	a = a.Unmap()
	if a.Zone() != "" {
		return "scoped address " + a.String() + " (RFC 4007)"
	}
	if a.Is4() {
		for _, r := range refused4 {
			if r.prefix.Contains(a) {
				return r.kind + " " + a.String() + " (" + r.ref + ")"
			}
		}
		return ""
	}
	// The embedding is checked first so that it names the refusal of a
	// local-use NAT64 address (the only one refused6 also holds).
	name, v4s := embeddedIPv4(a)
	for _, v4 := range v4s {
		if k := addrKind(v4); k != "" {
			return name + " " + a.String() + " (embeds " + k + ")"
		}
	}
	for _, r := range refused6 {
		if r.prefix.Contains(a) {
			return r.kind + " " + a.String() + " (" + r.ref + ")"
		}
	}
	if name != "" {
		return ""
	}
	if !global6.Contains(a) {
		return "reserved address " + a.String() + " (RFC 4291, not global unicast)"
	}
	return ""
}

// embeddedIPv4 returns, for an IPv6 address that leads to IPv4 addresses
// (NAT64, SIIT's IPv4-translated, 6to4, Teredo's server and client), what kind of address it is
// and those IPv4 addresses; "" and nil for any other address. A local-use
// NAT64 address (RFC 8215's 64:ff9b:1::/48) may sit under a prefix of any
// RFC 6052 length within it, which moat cannot know, so it leads to the
// IPv4 address each of the /96, /64, /56 and /48 layouts decodes.
func embeddedIPv4(a netip.Addr) (string, []netip.Addr) {
	if !a.Is6() {
		return "", nil
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return "NAT64 address", []netip.Addr{netip.AddrFrom4([4]byte(b[12:16]))}
	case nat64L.Contains(a):
		// RFC 6052 section 2.2; bits 64-71 (b[8]) are the u octet.
		var v4s []netip.Addr
		for _, v4 := range [][4]byte{
			{b[12], b[13], b[14], b[15]}, // /96
			{b[9], b[10], b[11], b[12]},  // /64
			{b[7], b[9], b[10], b[11]},   // /56
			{b[6], b[7], b[9], b[10]},    // /48
		} {
			if v := netip.AddrFrom4(v4); !slices.Contains(v4s, v) {
				v4s = append(v4s, v)
			}
		}
		return "local-use NAT64 address", v4s
	case sixToFour.Contains(a):
		return "6to4 address", []netip.Addr{netip.AddrFrom4([4]byte(b[2:6]))}
	case siit.Contains(a):
		return "IPv4-translated address", []netip.Addr{netip.AddrFrom4([4]byte(b[12:16]))}
	case teredo.Contains(a):
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		return "Teredo address", []netip.Addr{netip.AddrFrom4(client), netip.AddrFrom4([4]byte(b[4:8]))}
	}
	return "", nil
}

// ruleHostAddress starts the rule that refuses one of the host's own
// addresses: "the host's own address 93.184.216.34".
const ruleHostAddress = "the host's own address"

// ownAddrKind returns "" unless a is one of own, the host's addresses, or
// embeds one (NAT64, local-use NAT64, 6to4, Teredo), and then the rule that names it. Such
// an address leads back into the host as loopback does: a service
// listening on all addresses answers on it, to a connection from the
// host itself, which firewalls usually let through.
func ownAddrKind(a netip.Addr, own []netip.Addr) string {
	if slices.Contains(own, a) {
		return ruleHostAddress + " " + a.String()
	}
	name, v4s := embeddedIPv4(a)
	for _, v4 := range v4s {
		if slices.Contains(own, v4) {
			return name + " " + a.String() + " (embeds " + ruleHostAddress + " " + v4.String() + ")"
		}
	}
	return ""
}

// hostBlocks are the ranges whose addresses lead into the host itself (or,
// for the metadata addresses, to the secrets of the machine it runs on).
var hostBlocks = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("169.254.169.254/32"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// hostBlock returns, for an address that leads into the host itself (a
// loopback, unspecified or metadata address, one of own, or an IPv6
// spelling that embeds one), the range an allow_cidrs entry must lie
// within to allow it: the block it belongs to, or for one of own and an
// embedding, the address alone. A wider entry (a LAN the host sits in, a
// NAT64 prefix, 64:ff9b:1::/48 for an address one of whose layouts embeds
// such an address) does not open it.
func hostBlock(a netip.Addr, own []netip.Addr) (netip.Prefix, bool) {
	a = a.Unmap()
	for _, b := range hostBlocks {
		if b.Contains(a) {
			return b, true
		}
	}
	if slices.Contains(own, a) {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	_, v4s := embeddedIPv4(a)
	if a.Is6() && netip.MustParsePrefix("::/96").Contains(a) {
		v4s = append(v4s, netip.AddrFrom4([4]byte(a.AsSlice()[12:16])))
	}
	for _, v4 := range v4s {
		if _, ok := hostBlock(v4, own); ok {
			return netip.PrefixFrom(a, a.BitLen()), true
		}
	}
	return netip.Prefix{}, false
}
