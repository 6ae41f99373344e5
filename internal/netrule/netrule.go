// Package netrule is the one grammar of network destinations: the entries
// of [network] allow, deny and allow_cidrs, and the host names and IP
// literals the egress proxy is asked for. The policy package checks a
// policy with it and the egress package builds its rules with it, so what
// `moat policy show` accepts is what a run accepts. It is pure: no system
// call, no look-up, and it does not import net.
package netrule

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Host is one allow or deny entry: an exact host or, with Wildcard set,
// every name strictly below Domain; Port 0 matches any port.
type Host struct {
	// Entry is the entry as written, without surrounding spaces.
	Entry string
	// Domain is the name normalised (see NormalizeHost).
	Domain   string
	Wildcard bool
	Port     int
	// Local is set for a single-label name ("db", a compose or Kubernetes
	// service): such a name is no host on the internet, and is reachable
	// only at addresses allow_cidrs lists.
	Local bool
}

// ErrAddress is ParseHost's error for an entry that is an IP address.
var ErrAddress = errors.New("an IP address is not a host name")

// ParseHost parses an allow (allow set) or deny entry: "host", "*.domain"
// (every name below domain, not domain itself), either with ":port". It
// refuses "*", IP addresses (they belong in allow_cidrs) and, in an allow
// entry, a wildcard over a top-level domain. Whether a name is a public
// suffix is the egress package's concern (the list is data it embeds).
func ParseHost(entry string, allow bool) (Host, error) {
	s := strings.TrimSpace(entry)
	if s == "" {
		return Host{}, fmt.Errorf("empty entry")
	}
	if strings.Contains(s, "://") || strings.Contains(s, "/") {
		return Host{}, fmt.Errorf("not a destination: write a host name without a scheme or a path")
	}
	if s == "*" || strings.HasPrefix(s, "*:") {
		return Host{}, fmt.Errorf(`"*" matches every host; list the hosts the command needs`)
	}
	if strings.HasPrefix(s, "[") || strings.Contains(s, "::") || strings.Count(s, ":") > 1 && strings.Trim(s, "0123456789abcdefABCDEF:.%") == "" {
		return Host{}, fmt.Errorf("%w; put addresses in allow_cidrs", ErrAddress)
	}
	if strings.Count(s, ":") > 1 {
		return Host{}, fmt.Errorf("more than one ':': write HOST or HOST:PORT, one port an entry")
	}
	h := Host{Entry: s}
	if host, port, ok := strings.Cut(s, ":"); ok {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
			return Host{}, fmt.Errorf("port %q is not a number from 1 to 65535", port)
		}
		s, h.Port = host, n
	}
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		s, h.Wildcard = rest, true
	}
	if strings.Contains(s, "*") {
		return Host{}, fmt.Errorf(`"*" may only be the whole first label, as in "*.example.com"`)
	}
	if _, ok := ParseIPLiteral(s); ok {
		return Host{}, fmt.Errorf("%w; put addresses in allow_cidrs", ErrAddress)
	}
	name, err := NormalizeHost(s)
	if err != nil {
		return Host{}, err
	}
	h.Domain = name
	if !strings.Contains(name, ".") {
		if h.Wildcard && allow {
			return Host{}, fmt.Errorf("too broad: %q is a top-level domain, every name under it allowed; list the hosts you need", name)
		}
		h.Local = !h.Wildcard
	}
	return h, nil
}

// ParseCIDR parses an allow_cidrs entry: a prefix ("10.1.0.0/16") or a
// single address. A prefix with host bits set is refused rather than
// masked, since the writer meant one of two different things.
func ParseCIDR(entry string) (netip.Prefix, error) {
	s := strings.TrimSpace(entry)
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, fmt.Errorf("not an address range such as 10.1.0.0/16")
		}
		if p != p.Masked() {
			return p, fmt.Errorf("host bits are set; did you mean %q?", p.Masked().String())
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return p, fmt.Errorf("not an address or an address range such as 10.1.0.0/16")
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Zone() != "" {
		return p, fmt.Errorf("zones are not allowed")
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	if p.Bits() == 0 {
		return p, fmt.Errorf("too broad: it lists every address; list the ranges the command needs")
	}
	return p.Masked(), nil
}

// NormalizeHost returns the lower-case ASCII form of a host name without a
// trailing dot, or an error saying why it is not a usable host name.
// ASCII names are only lower-cased and checked (as net/http does), so that
// real names IDNA's strict rules reject ("r3---sn-x.example", "_a.example")
// still work; names with other characters go through IDNA's lookup
// profile (UTS #46 mapping, then Punycode).
func NormalizeHost(s string) (string, error) {
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return "", fmt.Errorf("empty host name")
	}
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if !ascii {
		a, err := idna.Lookup.ToASCII(s)
		if err != nil {
			return "", fmt.Errorf("not a valid international domain name: %v", err)
		}
		s = a
	}
	s = strings.ToLower(s)
	if len(s) > 253 {
		return "", fmt.Errorf("host name longer than 253 characters")
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", fmt.Errorf("host name has an empty label or one longer than 63 characters")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host name contains %q", c)
			}
		}
	}
	// A name whose last label is a number is an IP address in some
	// spelling (or a mistake): resolvers and URL parsers disagree on
	// those, so it is never looked up as a name (WHATWG URL does the same).
	if isNumericLabel(labels[len(labels)-1]) {
		return "", fmt.Errorf("the last label is a number: not a host name, and not an IP address either")
	}
	return s, nil
}

func isNumericLabel(l string) bool {
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		l = h
		for i := 0; i < len(l); i++ {
			if !isHex(l[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// ParseIPLiteral parses host as an IP address the way curl and glibc's
// inet_aton would: IPv6 in brackets or bare ("[::1]", "::ffff:127.0.0.1"),
// and IPv4 in one to four parts, each decimal, octal (leading 0) or hex
// (0x), the last part filling the remaining bytes ("2130706433",
// "0177.0.0.1", "0x7f.1", "127.1"), with an optional trailing dot. The
// standard library refuses these spellings on purpose; the proxy must
// recognise them, because a client that sends one connects to that
// address. IPv6 zones are refused.
func ParseIPLiteral(host string) (netip.Addr, bool) {
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return netip.Addr{}, false
		}
		return a, true
	}
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil || a.Zone() != "" {
			return netip.Addr{}, false
		}
		return a, true
	}
	return parseInetAton(strings.TrimSuffix(host, "."))
}

func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 || s == "" {
		return netip.Addr{}, false
	}
	var vals [4]uint64
	for i, p := range parts {
		v, ok := parseAtonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	n := len(parts)
	for i := 0; i < n-1; i++ {
		if vals[i] > 0xff {
			return netip.Addr{}, false
		}
	}
	if vals[n-1] >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	var u uint32
	for i := 0; i < n-1; i++ {
		u |= uint32(vals[i]) << (24 - 8*i)
	}
	u |= uint32(vals[n-1])
	return netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)}), true
}

// parseAtonPart parses one part of an inet_aton address; values are
// bounded well above any valid part so that overflow cannot wrap.
func parseAtonPart(p string) (uint64, bool) {
	base := 10
	switch {
	case len(p) > 2 && (p[:2] == "0x" || p[:2] == "0X"):
		base, p = 16, p[2:]
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	if p == "" || len(p) > 12 {
		return 0, false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '+' || p[i] == '-' || p[i] == '_' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(p, base, 64)
	if err != nil || v > 0xffffffff {
		return 0, false
	}
	return v, true
}
