package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/internal/rt0"
	"github.com/moatbox/moat/policy"
)

// ProxyPort is where the egress proxy listens inside the sandbox
// (127.0.0.1) in network mode allow. The namespace is the run's own, so a
// fixed port collides with nothing.
const ProxyPort = 3128

// The TUN device of network mode allow. Its addresses are in 198.18.0.0/15
// (RFC 2544, for benchmarks: used by no real service): the sandbox has
// tunAddr, moat's resolver answers at tunDNS, and the names it resolves get
// addresses of tunNames, one per name for the run.
var (
	tunAddr  = netip.MustParsePrefix("198.18.0.1/15")
	tunDNS   = netip.AddrFrom4([4]byte{198, 18, 0, 2})
	tunNames = netip.MustParsePrefix("198.19.0.0/16")
)

const (
	tunName = "moat0"
	// tunMTU is large: each packet is one read(2) or write(2) on the
	// device, so fewer, larger ones move more bytes.
	tunMTU = 65520
	// tunVnetHdr gives the device virtio-net headers and checksum
	// offload (backend.TUN.VnetHdr, egress.TUNConfig.VnetHdr): neither
	// the sandbox's kernel nor moat's stack sums the bytes they pass
	// each other in memory.
	tunVnetHdr = true
	// resolvConf points the sandbox's resolver at moat's. Short timeouts:
	// the answer comes from moat's own process.
	resolvConf = "# moat: names are answered by moat from the [network] rules\nnameserver 198.18.0.2\noptions timeout:2 attempts:2\n"
	// hostsFile is the sandbox's /etc/hosts in allow mode: loopback's
	// names alone, every other name for moat's resolver or proxy.
	hostsFile = "# moat: other names are answered by moat from the [network] rules\n127.0.0.1\tlocalhost\n127.0.1.1\t" + hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	// hostname is the sandbox's host name (its UTS namespace's).
	hostname = "moat"
)

// NetworkReport is what the network did during a run.
type NetworkReport struct {
	// Mode is none, allow or host.
	Mode string `json:"mode"`
	// Events has one entry per connection attempt through the proxy
	// (per request for plain HTTP), in the order they ended: the first
	// maxReportEvents of them.
	Events []egress.Event `json:"events"`
	// EventsDropped is the number of events after those (each reached
	// Request.Audit, the audit log, all the same).
	EventsDropped int `json:"events_dropped,omitempty"`
	// Refused sums up the refused destinations: the first
	// egress.MaxRefusals of them.
	Refused []egress.Refusal `json:"refused"`
	// RefusedUnlisted is the number of refusals of destinations beyond
	// those in Refused.
	RefusedUnlisted int `json:"refused_unlisted,omitempty"`
	// Summary is the one-line human account ("" when nothing happened).
	//
	// A command of a session has no Events of its own (the session's
	// report and audit stream have them); its Refused and Summary are
	// what the session's proxy refused, and could not reach, while the
	// command ran, whichever of the session's commands asked.
	Summary string `json:"summary,omitempty"`
}

// proxyEnv points the usual proxy variables at the in-sandbox listener.
// ALL_PROXY uses socks5h so that names are resolved by the proxy, which
// then sees them (moat's resolver on the TUN device answers names, not
// the addresses they have). NO_PROXY keeps the sandbox's own loopback
// direct, but not a loopback name the allowlist names (allow =
// ["localhost:8080"] means the host's): a client would go to the
// sandbox's loopback instead, and find nothing there.
func proxyEnv(allow []string) map[string]string {
	httpURL := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	socks := "socks5h://127.0.0.1:" + strconv.Itoa(ProxyPort)
	var direct []string
	for _, name := range []string{"localhost", "127.0.0.1", "::1"} {
		if !slices.ContainsFunc(allow, func(entry string) bool { return allowHost(entry) == name }) {
			direct = append(direct, name)
		}
	}
	noProxy := strings.Join(direct, ",")
	env := map[string]string{}
	for _, v := range []struct{ name, val string }{
		{"HTTP_PROXY", httpURL}, {"HTTPS_PROXY", httpURL}, {"ALL_PROXY", socks}, {"NO_PROXY", noProxy},
	} {
		env[v.name] = v.val
		env[strings.ToLower(v.name)] = v.val
	}
	return env
}

// allowHost is the host an allowlist entry names, lower case, without
// its port or an IPv6 address's brackets.
func allowHost(entry string) string {
	host := entry
	if h, _, err := net.SplitHostPort(entry); err == nil {
		host = h
	}
	return strings.ToLower(strings.Trim(host, "[]"))
}

// networkRules parses the policy's network lists, reporting problems as
// *policy.Errors located at the entries.
func networkRules(p *policy.Policy) (*egress.Rules, error) {
	rules, err := egress.ParseRules(p.Network.Allow, p.Network.Deny, p.Network.AllowCIDRs)
	var re *egress.RulesError
	if !errors.As(err, &re) {
		return rules, err
	}
	var errs policy.Errors
	for _, prob := range re.Problems {
		field := fmt.Sprintf("network.%s[%d]", prob.List, prob.Index)
		errs = append(errs, p.FieldError(field, fmt.Sprintf("%q: %v", prob.Entry, prob.Err)))
	}
	return nil, policy.BoundErrors(errs)
}

// CheckPolicy makes the checks of a valid policy that Run makes before
// it starts anything and that need more than the policy package: the
// network rules as the egress proxy reads them (a name on the public
// suffix list is too broad to allow). It returns *policy.Errors.
func CheckPolicy(p *policy.Policy) error {
	_, err := networkRules(p)
	return err
}

// maxReportEvents bounds the events a report keeps, the first ones: a
// sandbox makes events as fast as it sends DNS queries through the TUN
// device or opens connections to the proxy, and the report is held in
// moat's memory for the run (the daemon's, for a session's whole life).
const maxReportEvents = 10000

// egressRun is the proxy of one allow-mode run and what it saw.
type egressRun struct {
	proxy   *egress.Proxy
	mu      sync.Mutex
	events  []egress.Event
	dropped int // events after the first maxReportEvents
	summary egress.Summary
	// watchers are told every event too: the summaries of a session's
	// commands that run (see watch).
	watchers map[*egress.Summary]struct{}
}

func newEgressRun(rules *egress.Rules, p *policy.Policy, req *Request, runID string) *egressRun {
	// The proxy and the TUN device's stack hand every packet and buffer
	// from goroutine to goroutine: the runtime's threads should take them
	// up as promptly as without moat's entry point (internal/rt0).
	go rt0.RestoreThreads()
	er := &egressRun{}
	er.proxy = &egress.Proxy{
		Rules:     rules,
		InSandbox: []netip.Addr{tunAddr.Addr(), tunDNS},
		RunID:     runID,
		HTTPSOnly: p.Network.HTTPSOnly,
		Resolver:  req.Resolver,
		Dial:      req.Dial,
		Audit: func(e egress.Event) {
			er.mu.Lock()
			if len(er.events) < maxReportEvents {
				er.events = append(er.events, e)
			} else {
				er.dropped++
			}
			for w := range er.watchers {
				w.Add(e)
			}
			er.mu.Unlock()
			er.summary.Add(e)
			if req.Audit != nil {
				req.Audit(e)
			}
		},
	}
	return er
}

func (er *egressRun) serve(l net.Listener) { er.proxy.Serve(l) }

// watch sums up the events from now until end is called, for a command
// of a session: what its proxy refused, and could not reach, while the
// command ran. The session's commands share the proxy, which cannot tell
// them apart: an event is in the sum of every command that ran when it
// happened. end returns the command's NetworkReport.
func (er *egressRun) watch() (end func() *NetworkReport) {
	w := &egress.Summary{}
	er.mu.Lock()
	if er.watchers == nil {
		er.watchers = map[*egress.Summary]struct{}{}
	}
	er.watchers[w] = struct{}{}
	er.mu.Unlock()
	return func() *NetworkReport {
		er.mu.Lock()
		delete(er.watchers, w)
		er.mu.Unlock()
		return &NetworkReport{Mode: policy.NetworkAllow, Events: []egress.Event{},
			Refused: w.Refused(), RefusedUnlisted: w.Unlisted(), Summary: w.String()}
	}
}

// serveTUN serves the TUN device until the proxy is closed. A device that
// cannot be served is closed by ServeTUN: the sandbox then has no way out
// but the proxy, and the failure is an error event of the run.
func (er *egressRun) serveTUN(f *os.File) {
	err := er.proxy.ServeTUN(f, egress.TUNConfig{MTU: tunMTU, DNS: tunDNS, Names: tunNames, VnetHdr: tunVnetHdr})
	if err != nil && !errors.Is(err, egress.ErrClosed) {
		er.proxy.Audit(egress.Event{Time: time.Now(), Proto: egress.ProtoTCP, Decision: egress.DecisionError,
			Rule: "tun", Reason: err.Error()})
	}
}

func (er *egressRun) report() *NetworkReport {
	er.proxy.Close()
	er.mu.Lock()
	defer er.mu.Unlock()
	r := &NetworkReport{Mode: policy.NetworkAllow, Events: er.events, EventsDropped: er.dropped,
		Refused: er.summary.Refused(), RefusedUnlisted: er.summary.Unlisted()}
	if r.Events == nil {
		r.Events = []egress.Event{}
	}
	if len(r.Events) > 0 {
		r.Summary = er.summary.String()
	}
	return r
}

// networkSpec is the backend's network plan for the policy's mode.
func networkSpec(n policy.Network) backend.Network {
	var s backend.Network
	switch n.Mode {
	case policy.NetworkAllow:
		s = backend.Network{Mode: backend.NetProxy, ProxyPort: ProxyPort}
		if n.Transparent {
			s.TUN = &backend.TUN{Name: tunName, Addr: tunAddr, MTU: tunMTU, VnetHdr: tunVnetHdr}
		}
	case policy.NetworkHost:
		s = backend.Network{Mode: backend.NetHost}
	default:
		s = backend.Network{Mode: backend.NetNone}
	}
	if n.TCPBind != nil {
		s.RestrictBind = true
		s.BindPorts = append([]int{}, *n.TCPBind...)
	}
	if n.TCPConnect != nil {
		s.RestrictConnect = true
		s.ConnectPorts = append([]int{}, *n.TCPConnect...)
		if s.Mode == backend.NetProxy {
			// The proxy is the only way out: it stays reachable.
			s.ConnectPorts = append(s.ConnectPorts, s.ProxyPort)
		}
	}
	return s
}

// Hooks for tests: where the proxy resolves and dials.
type (
	// ResolverFunc resolves a host name for the egress proxy.
	ResolverFunc = func(ctx context.Context, host string) ([]netip.Addr, error)
	// DialFunc connects the egress proxy to exactly addr.
	DialFunc = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
)

// TransparentEgressUnavailable says why network mode allow would run
// with the proxy alone on this host ("" when it gets the TUN device): for
// moat doctor.
func TransparentEgressUnavailable() string {
	return tunUnusable((&backend.TUN{}).DevDir())
}

// tunUnusable says why the sandbox's user could not open the TUN clone
// device in dir ("" when it can). The device is opened by the sandbox's
// init, as the sandbox's user and without any capability over the host's
// files, so only a device everyone may read and write will do (the usual
// setting: udev's rule KERNEL=="tun", MODE="0666").
func tunUnusable(dir string) string {
	if !egress.TUNBuiltIn {
		return "it needs Linux"
	}
	path := filepath.Join(dir, "tun")
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return err.Error()
	case st.Mode()&os.ModeCharDevice == 0:
		return path + " is not a character device"
	case st.Mode().Perm()&0o006 != 0o006:
		return fmt.Sprintf("%s is mode %#o, and the sandbox's user may not open it; mode 0666 is the usual setting", path, st.Mode().Perm())
	}
	return ""
}

// prepareTUN points a Spec's TUN device at dir's clone device (empty:
// /dev/net), or leaves the device out when the sandbox's user could not
// open it, and then returns the warning that says so.
func prepareTUN(spec *backend.Spec, dir string) string {
	t := spec.Network.TUN
	if t == nil {
		return ""
	}
	t.Dir = dir
	if !egress.TUNBuiltIn {
		// Not on this platform: allow mode is the proxy's alone.
		dropTUN(spec)
		return ""
	}
	if why := tunUnusable(t.DevDir()); why != "" {
		dropTUN(spec)
		return "network: no transparent egress (" + why + "): only programs that use the proxy variables reach the network"
	}
	return ""
}

// dropTUN leaves the TUN device and its resolver out of a Spec: the run
// then has the proxy only, as it would without the device. The minimal
// /etc/hosts stays: without the device no name leads anywhere but
// through the proxy, which resolves on the host.
func dropTUN(spec *backend.Spec) {
	spec.Network.TUN = nil
	spec.Mounts = slices.DeleteFunc(spec.Mounts, func(m backend.Mount) bool {
		return m.Kind == backend.MountFile && m.Data == resolvConf
	})
}
