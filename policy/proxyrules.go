package policy

import "fmt"

// validateProxyRules refuses what only the egress proxy enforces (host
// rules, the request and network budgets) in network mode "host", whose
// commands reach the network without it: they would hold nothing.
func (p *Policy) validateProxyRules(l *errorList) {
	if p.Network.Mode != NetworkHost {
		return
	}
	why := fmt.Sprintf("the egress proxy enforces it, and network.mode %q does not use the proxy; set network.mode = %q", NetworkHost, NetworkAllow)
	for i, r := range p.Rules {
		if r.Match.Host != "" {
			l.add(indexKey("rules", i)+".match.host", why)
		}
	}
	if p.Budgets.Network > 0 {
		l.add("budgets.network", why)
	}
	if len(p.Budgets.Requests) > 0 {
		l.add("budgets.requests", why)
	}
}
