package egress

import (
	"fmt"
	"net/netip"
	"sync"
)

// RuleOwnListener is the rule of a refusal to reach one of moat's own
// listeners (RefuseListener).
const RuleOwnListener = "moat's own listener"

// ownListeners are the TCP addresses this process serves moat on (the
// daemon's API and approvals page), with how many registrations each has.
var ownListeners struct {
	mu    sync.Mutex
	addrs map[netip.AddrPort]int
}

// RefuseListener makes every proxy (and transparent device) of this
// process refuse to connect to ap, a TCP address on which this process
// serves moat itself (moat serve --listen), whatever the rules and
// allow_cidrs say, until done is called: a command in a sandbox that may
// reach loopback or the host's addresses must still not reach the daemon
// that runs it (its login page, its API, the approvals of its own asks).
// A listener on an unspecified address (0.0.0.0, ::) is refused at every
// loopback and host address; one on a loopback address at every loopback
// address, since a server listening on all addresses answers there too.
func RefuseListener(ap netip.AddrPort) (done func()) {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	l := &ownListeners
	l.mu.Lock()
	if l.addrs == nil {
		l.addrs = map[netip.AddrPort]int{}
	}
	l.addrs[ap]++
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			if l.addrs[ap]--; l.addrs[ap] <= 0 {
				delete(l.addrs, ap)
			}
			l.mu.Unlock()
		})
	}
}

// checkOwnListener refuses a, port when it leads to one of moat's own
// listeners: the listener's address itself, or, on the listener's port,
// a loopback, unspecified or host address (own). It is checked before
// allow_cidrs, which cannot open it.
func checkOwnListener(a netip.Addr, port int, own []netip.Addr) (Verdict, bool) {
	l := &ownListeners
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.addrs) == 0 {
		return Verdict{}, false
	}
	a = a.Unmap()
	local := a.IsLoopback() || a.IsUnspecified() || ownAddrKind(a, own) != ""
	for ap := range l.addrs {
		if int(ap.Port()) != port || !(ap.Addr() == a || local) {
			continue
		}
		return Verdict{Rule: RuleOwnListener, Reason: fmt.Sprintf(
			"%s leads to moat's own listener %s (the daemon's API and approvals page): a sandbox never reaches the daemon that runs it, whatever [network] allow_cidrs says",
			netip.AddrPortFrom(a, uint16(port)), ap)}, true
	}
	return Verdict{}, false
}
