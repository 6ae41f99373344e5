package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/policy"
)

// ProxyPort is where the egress proxy listens inside the sandbox
// (127.0.0.1) in network mode allow. The namespace is the run's own, so a
// fixed port collides with nothing.
const ProxyPort = 3128

// NetworkReport is what the network did during a run.
type NetworkReport struct {
	// Mode is none, allow or host.
	Mode string `json:"mode"`
	// Events has one entry per connection attempt through the proxy
	// (per request for plain HTTP), in the order they ended.
	Events []egress.Event `json:"events"`
	// Refused sums up the refused destinations.
	Refused []egress.Refusal `json:"refused"`
	// Summary is the one-line human account ("" when nothing happened).
	Summary string `json:"summary,omitempty"`
}

// proxyEnv points the usual proxy variables at the in-sandbox listener.
// ALL_PROXY uses socks5h so that names are resolved by the proxy: there
// is no resolver inside.
func proxyEnv() map[string]string {
	httpURL := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	socks := "socks5h://127.0.0.1:" + strconv.Itoa(ProxyPort)
	noProxy := "localhost,127.0.0.1,::1"
	env := map[string]string{}
	for _, v := range []struct{ name, val string }{
		{"HTTP_PROXY", httpURL}, {"HTTPS_PROXY", httpURL}, {"ALL_PROXY", socks}, {"NO_PROXY", noProxy},
	} {
		env[v.name] = v.val
		env[strings.ToLower(v.name)] = v.val
	}
	return env
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
	return nil, &errs
}

// CheckPolicy makes the checks of a valid policy that Run makes before
// it starts anything and that need more than the policy package: the
// network rules as the egress proxy reads them (a name on the public
// suffix list is too broad to allow). It returns *policy.Errors.
func CheckPolicy(p *policy.Policy) error {
	_, err := networkRules(p)
	return err
}

// egressRun is the proxy of one allow-mode run and what it saw.
type egressRun struct {
	proxy   *egress.Proxy
	mu      sync.Mutex
	events  []egress.Event
	summary egress.Summary
}

func newEgressRun(rules *egress.Rules, p *policy.Policy, req *Request, runID string) *egressRun {
	er := &egressRun{}
	er.proxy = &egress.Proxy{
		Rules:     rules,
		RunID:     runID,
		HTTPSOnly: p.Network.HTTPSOnly,
		Resolver:  req.Resolver,
		Dial:      req.Dial,
		Audit: func(e egress.Event) {
			er.mu.Lock()
			er.events = append(er.events, e)
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

func (er *egressRun) report() *NetworkReport {
	er.proxy.Close()
	er.mu.Lock()
	defer er.mu.Unlock()
	r := &NetworkReport{Mode: policy.NetworkAllow, Events: er.events, Refused: er.summary.Refused()}
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
