package egress

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/moatbox/moat/internal/netrule"
	"golang.org/x/net/publicsuffix"
)

// Rules is a parsed, immutable set of destination rules: host patterns to
// allow and to deny, and the address ranges (allow_cidrs) that may be
// reached although they are private, and that IP-literal destinations are
// matched against. A *Rules is safe for concurrent use.
type Rules struct {
	allow []hostRule
	deny  []hostRule
	cidrs []cidrRule
}

// hostRule is one allow or deny entry (see netrule.Host).
type hostRule = netrule.Host

type cidrRule struct {
	entry  string
	prefix netip.Prefix
}

// Dest is one destination a client asked for. Host is the name or address
// as the client wrote it (any case, trailing dot, Unicode or an IP literal
// in any spelling); IP is set when the client gave an address rather than
// a name (SOCKS5 address types 1 and 4). Port is the TCP port.
type Dest struct {
	Host string
	Port int
	IP   netip.Addr
}

// Verdict is the answer for one destination or address. Rule names what
// decided it: the allow or deny entry as written, an allow_cidrs range,
// "default deny", or the kind of address refused (for example "private
// address 10.0.0.1 (RFC 1918)"). Reason is a sentence for the user that
// says what happened and, for a refusal, how to allow it.
type Verdict struct {
	Allow  bool   `json:"allow"`
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// RuleDefaultDeny is the Rule of a destination that no entry allows.
const RuleDefaultDeny = "default deny"

// RuleLocalName is the Rule of a single-label name that resolved to an
// address allow_cidrs does not list.
const RuleLocalName = "single-label name outside allow_cidrs"

// ParseRules parses and checks the [network] allow, deny and allow_cidrs
// lists. Host entries are "host", "*.domain" (every name below domain, not
// domain itself), "host:port" and "*.domain:port"; an entry without a port
// matches every port. Names are compared in lower-case ASCII (IDNA) form
// without a trailing dot. Allow entries that would match names anyone can
// register ("*", "*.com", "*.co.uk", "*.github.io", a bare top-level
// domain) are refused, as are IP addresses, which belong in allow_cidrs.
// allowCIDRs entries are prefixes ("10.1.0.0/16") or single addresses.
// All problems are reported at once, each naming its entry.
func ParseRules(allow, deny, allowCIDRs []string) (*Rules, error) {
	r := &Rules{}
	var errs []RuleProblem
	for i, e := range allow {
		hr, err := parseHostRule(e, true)
		if err != nil {
			errs = append(errs, RuleProblem{List: "allow", Index: i, Entry: e, Err: err})
			continue
		}
		r.allow = append(r.allow, hr)
	}
	for i, e := range deny {
		hr, err := parseHostRule(e, false)
		if err != nil {
			errs = append(errs, RuleProblem{List: "deny", Index: i, Entry: e, Err: err})
			continue
		}
		r.deny = append(r.deny, hr)
	}
	for i, e := range allowCIDRs {
		p, err := parseCIDR(e)
		if err != nil {
			errs = append(errs, RuleProblem{List: "allow_cidrs", Index: i, Entry: e, Err: err})
			continue
		}
		r.cidrs = append(r.cidrs, cidrRule{entry: strings.TrimSpace(e), prefix: p})
	}
	if len(errs) > 0 {
		return nil, &RulesError{Problems: errs}
	}
	return r, nil
}

// RulesError lists every problem ParseRules found, one per entry.
type RulesError struct {
	Problems []RuleProblem
}

// RuleProblem is one refused entry: which list ("allow", "deny",
// "allow_cidrs"), its position there, the entry and why.
type RuleProblem struct {
	List  string
	Index int
	Entry string
	Err   error
}

func (p RuleProblem) String() string { return fmt.Sprintf("%s %q: %v", p.List, p.Entry, p.Err) }

func (e *RulesError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "network rules: " + strings.Join(parts, "; ")
}

// parseHostRule is netrule's grammar, and for an allow entry the public
// suffix list's: a name anyone can register under is too broad to allow.
func parseHostRule(entry string, isAllow bool) (hostRule, error) {
	hr, err := netrule.ParseHost(entry, isAllow)
	if err != nil || !isAllow || hr.Local {
		return hr, err
	}
	name := hr.Domain
	suffix, icann := publicsuffix.PublicSuffix(name)
	if suffix == name {
		if hr.Wildcard {
			return hostRule{}, fmt.Errorf("too broad: %s is a public suffix (on the Public Suffix List), anyone can register names under it; list the hosts you need", name)
		}
		if icann {
			return hostRule{}, fmt.Errorf("%s is a public suffix, not a host; list the hosts you need", name)
		}
	}
	return hr, nil
}

var (
	parseCIDR     = netrule.ParseCIDR
	normalizeHost = netrule.NormalizeHost
)

// ParseIPLiteral parses host as an IP address the way curl and glibc's
// inet_aton would (see netrule.ParseIPLiteral).
func ParseIPLiteral(host string) (netip.Addr, bool) { return netrule.ParseIPLiteral(host) }

// match reports whether h matches name (normalised) and port.
func match(h hostRule, name string, port int) bool {
	if h.Port != 0 && h.Port != port {
		return false
	}
	if h.Wildcard {
		return len(name) > len(h.Domain) && strings.HasSuffix(name, h.Domain) &&
			name[len(name)-len(h.Domain)-1] == '.'
	}
	return name == h.Domain
}

// Decide says whether a client may connect to d, from the destination
// alone: it never resolves a name. Names are matched against the deny
// entries first (deny beats allow), then the allow entries; IP literals
// (d.IP, or d.Host spelled as an address, including forms like
// "2130706433", "0177.0.0.1" and "127.1") only against allow_cidrs. An
// allowed name must still have each address it resolves to pass
// CheckAddr before anything connects to it.
func (r *Rules) Decide(d Dest) Verdict {
	if d.Port < 1 || d.Port > 65535 {
		return Verdict{Rule: "invalid port", Reason: fmt.Sprintf("port %d is not a TCP port", d.Port)}
	}
	ip := d.IP
	if !ip.IsValid() {
		if a, ok := ParseIPLiteral(d.Host); ok {
			ip = a
		}
	}
	if ip.IsValid() {
		return r.decideIP(ip, d.Port)
	}
	name, err := normalizeHost(d.Host)
	if err != nil {
		return Verdict{Rule: "invalid host", Reason: fmt.Sprintf("%q is not a valid host name: %v", d.Host, err)}
	}
	for _, h := range r.deny {
		if match(h, name, d.Port) {
			return Verdict{Rule: h.Entry, Reason: fmt.Sprintf(
				"%s:%d is refused by the [network] deny entry %q; remove that entry to allow it",
				name, d.Port, h.Entry)}
		}
	}
	for _, h := range r.allow {
		if match(h, name, d.Port) {
			return Verdict{Allow: true, Rule: h.Entry, Reason: fmt.Sprintf(
				"%s:%d is allowed by the [network] allow entry %q", name, d.Port, h.Entry)}
		}
	}
	return Verdict{Rule: RuleDefaultDeny, Reason: fmt.Sprintf(
		"%s:%d is not in the allow list; to allow it, add %q to [network] allow, or --net allow:%s%s",
		name, d.Port, name, name, localNameToo(name))}
}

// localNameToo is what a refusal's remedy adds for a single-label name:
// an allow entry alone would be refused next (CheckLocal).
func localNameToo(name string) string {
	if !IsLocalName(name) {
		return ""
	}
	return ", and the addresses it resolves to to [network] allow_cidrs (a single-label name is reached only there)"
}

// DecideName says whether a name may be resolved inside the sandbox (the
// TUN device's DNS): when some allow entry matches it on some port and no
// deny entry for every port matches it. Each connection to the name is
// then decided by Decide, with its port. An IP literal is never a name.
func (r *Rules) DecideName(host string) Verdict {
	if _, ok := ParseIPLiteral(host); ok {
		return Verdict{Rule: "invalid host", Reason: fmt.Sprintf("%q is an address, not a name", host)}
	}
	name, err := normalizeHost(host)
	if err != nil {
		return Verdict{Rule: "invalid host", Reason: fmt.Sprintf("%q is not a valid host name: %v", host, err)}
	}
	for _, h := range r.deny {
		if h.Port == 0 && match(h, name, 0) {
			return Verdict{Rule: h.Entry, Reason: fmt.Sprintf(
				"%s is refused by the [network] deny entry %q; remove that entry to allow it", name, h.Entry)}
		}
	}
	for _, h := range r.allow {
		if match(h, name, h.Port) {
			return Verdict{Allow: true, Rule: h.Entry, Reason: fmt.Sprintf(
				"%s is allowed by the [network] allow entry %q", name, h.Entry)}
		}
	}
	return Verdict{Rule: RuleDefaultDeny, Reason: fmt.Sprintf(
		"%s is not in the allow list (so it does not resolve); to allow it, add %q to [network] allow, or --net allow:%s%s",
		name, name, name, localNameToo(name))}
}

func (r *Rules) decideIP(ip netip.Addr, port int) Verdict {
	ip = ip.Unmap()
	if c, ok := r.cidrFor(ip); ok {
		return Verdict{Allow: true, Rule: c.entry, Reason: fmt.Sprintf(
			"%s is allowed by the [network] allow_cidrs entry %q", netip.AddrPortFrom(ip, uint16(port)), c.entry)}
	}
	rule := RuleDefaultDeny
	if kind := addrKind(ip); kind != "" {
		rule = kind
	}
	return Verdict{Rule: rule, Reason: fmt.Sprintf(
		"%s: IP addresses are allowed only by [network] allow_cidrs (host entries match names only); to allow it, add %q to [network] allow_cidrs",
		netip.AddrPortFrom(ip, uint16(port)), netip.PrefixFrom(ip, ip.BitLen()).String())}
}

func (r *Rules) cidrFor(ip netip.Addr) (cidrRule, bool) {
	for _, c := range r.cidrs {
		if c.prefix.Contains(ip) {
			return c, true
		}
	}
	return cidrRule{}, false
}

// CheckAddr says whether the proxy may connect to a in order to reach
// host (used in the explanation only). It refuses addresses that lead
// back into the host or its private networks (loopback, RFC 1918, CGNAT,
// link-local including the cloud metadata service, multicast, broadcast,
// unspecified and reserved ranges, IPv6 ULA and link-local), the host's
// own addresses (own, the addresses on its interfaces, which reach
// services listening on all addresses as loopback does), and the
// IPv4-mapped, IPv4-compatible, NAT64, 6to4 and Teredo spellings of
// those, unless allow_cidrs contains the address. It makes no system
// call: the caller reads own.
func (r *Rules) CheckAddr(host string, a netip.Addr, own []netip.Addr) Verdict {
	a = a.Unmap()
	// What the address is (private, loopback...) says more than that
	// the host holds it, so it names the refusal when it applies.
	kind := addrKind(a)
	if kind == "" {
		kind = ownAddrKind(a, own)
	}
	what := host + " resolves to " + a.String()
	if host == "" || host == a.String() {
		what = a.String()
	}
	block, intoHost := hostBlock(a, own)
	var wide *cidrRule
	for _, c := range r.cidrs {
		if !c.prefix.Contains(a) {
			continue
		}
		if intoHost && (c.prefix.Bits() < block.Bits() || !block.Contains(c.prefix.Addr())) {
			// A range that merely contains such an address (a LAN the
			// host sits in, 0.0.0.0/1, a NAT64 prefix) does not open it.
			if wide == nil {
				wide = &c
			}
			continue
		}
		return Verdict{Allow: true, Rule: c.entry, Reason: fmt.Sprintf(
			"%s is allowed by the [network] allow_cidrs entry %q", a, c.entry)}
	}
	if wide != nil {
		// The range is listed, so what refuses the address is that it
		// leads into the host: the rule (the one line a refusal gets)
		// says so where the host holds it, not only that it is private.
		if k := ownAddrKind(a, own); k != "" {
			kind = k
		}
		return Verdict{Rule: kind, Reason: fmt.Sprintf(
			"%s: %s, which leads back into the host (or to the cloud metadata service): the [network] allow_cidrs entry %q contains it but is wider than %s; to allow it, add %q (or a range within it) to [network] allow_cidrs",
			what, kind, wide.entry, block, block)}
	}
	if kind == "" {
		return Verdict{Allow: true, Rule: "public address", Reason: fmt.Sprintf("%s is a public address", a)}
	}
	return Verdict{Rule: kind, Reason: fmt.Sprintf(
		"%s: %s; moat refuses such addresses unless [network] allow_cidrs lists them; to allow it, add %q to [network] allow_cidrs",
		what, kind, netip.PrefixFrom(a, a.BitLen()).String())}
}

// IsLocalName reports whether name (normalised) is a single-label name,
// such as a compose or Kubernetes service: CheckLocal applies to it.
func IsLocalName(name string) bool { return name != "" && !strings.Contains(name, ".") }

// CheckLocal says whether the proxy may connect to a in order to reach
// the single-label name host. Such a name is whatever the resolver's
// search list makes of it, so only the ranges the user listed in
// allow_cidrs are trusted for it, public addresses included.
func (r *Rules) CheckLocal(host string, a netip.Addr) Verdict {
	a = a.Unmap()
	if c, ok := r.cidrFor(a); ok {
		return Verdict{Allow: true, Rule: c.entry, Reason: fmt.Sprintf(
			"%s resolves to %s, allowed by the [network] allow_cidrs entry %q", host, a, c.entry)}
	}
	return Verdict{Rule: RuleLocalName, Reason: fmt.Sprintf(
		"%s resolves to %s, which [network] allow_cidrs does not list: a single-label name (a local service) is reachable only at the addresses allow_cidrs lists; to allow it, add its range (e.g. %q) to [network] allow_cidrs",
		host, a, netip.PrefixFrom(a, a.BitLen()).String())}
}
