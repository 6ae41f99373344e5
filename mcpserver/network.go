package mcpserver

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/moatbox/moat/egress"
)

// NetworkLog keeps a session's recent network refusals, and the
// destinations it allowed that could not be reached, so that a command's
// result can name those met while it ran (a client such as curl shows a
// tunnel's 403 or 502, not why). A session's commands
// share one proxy, which cannot tell them apart: a refusal is shown to
// every command that ran when it happened. Give its Record to
// daemon.CreateRequest.NetworkEvents and the log to Options.Network.
type NetworkLog struct {
	mu      sync.Mutex
	refused []egress.Event // oldest first, at most maxRefused; failures too
}

const maxRefused = 256

// Record keeps e if it is a refusal, or a failure to reach a named
// destination.
func (l *NetworkLog) Record(e egress.Event) {
	if e.Decision != egress.DecisionDeny && (e.Decision != egress.DecisionError || e.Host == "") {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.refused) >= maxRefused {
		l.refused = append(l.refused[:0], l.refused[1:]...)
	}
	l.refused = append(l.refused, e)
}

// since returns one line per destination refused, or not reached, at or
// after t.
func (l *NetworkLog) since(t time.Time) []string {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for _, e := range l.refused {
		dest := net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
		if e.Time.Before(t) || seen[dest] {
			continue
		}
		seen[dest] = true
		if e.Decision == egress.DecisionError {
			why := e.Reason
			if why == "" {
				why = e.Rule
			}
			out = append(out, fmt.Sprintf("network: could not reach %s (allowed): %s", dest, why))
			continue
		}
		why := e.Reason
		if why == "" {
			why = dest + " was refused by the policy"
		}
		out = append(out, "network: "+why+" (see session_info)")
	}
	return out
}
