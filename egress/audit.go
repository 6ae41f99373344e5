package egress

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Event is the record of one connection attempt through the proxy (one per
// request for forwarded plain-HTTP requests), passed to Proxy.Audit when
// the attempt ends: after a refusal, or when the connection closes.
type Event struct {
	Time      time.Time     `json:"time"` // when the attempt started
	RunID     string        `json:"run_id,omitempty"`
	Proto     string        `json:"proto"`          // ProtoHTTP, ProtoConnect, ProtoSOCKS5, ProtoIntercepted, ProtoTCP, ProtoDNS or ProtoUDP
	Host      string        `json:"host,omitempty"` // as the client named it (normalised)
	Port      int           `json:"port,omitempty"` // destination port
	Addr      string        `json:"addr,omitempty"` // the address connected to, "ip:port"
	SNI       string        `json:"sni,omitempty"`  // TLS server name the client sent, if any
	Decision  string        `json:"decision"`       // DecisionAllow, DecisionDeny or DecisionError
	Rule      string        `json:"rule,omitempty"` // what decided (see Verdict.Rule)
	Reason    string        `json:"reason,omitempty"`
	BytesUp   int64         `json:"bytes_up"`    // client to destination
	BytesDown int64         `json:"bytes_down"`  // destination to client
	Duration  time.Duration `json:"duration_ns"` // from the first byte read to the end
	// Method and Path are those of a request the proxy read inside a TLS
	// connection it intercepted (Proto ProtoIntercepted), and Secrets the
	// names (never the values) of the secrets it added to it.
	Method  string   `json:"method,omitempty"`
	Path    string   `json:"path,omitempty"`
	Secrets []string `json:"secrets,omitempty"`
}

// Values of Event.Proto and Event.Decision.
const (
	ProtoHTTP    = "http"
	ProtoConnect = "connect"
	ProtoSOCKS5  = "socks5"
	// A TCP connection, DNS query or UDP datagram the sandbox sent
	// through the TUN device (see Proxy.ServeTUN).
	ProtoTCP = "tcp"
	ProtoDNS = "dns"
	ProtoUDP = "udp"

	DecisionAllow = "allow"
	DecisionDeny  = "deny"
	DecisionError = "error"
)

// Summary aggregates events into a short account of what was refused, for
// a human line at the end of a run. Add is safe for concurrent use, so a
// Summary's Add can be (part of) a Proxy's Audit hook. The zero value is
// ready to use.
type Summary struct {
	mu       sync.Mutex
	allowed  int
	errors   int
	refused  map[string]*Refusal
	unlisted int // refusals of destinations beyond the first MaxRefusals
}

// MaxRefusals bounds the refused destinations a Summary lists one by one:
// the first ones refused. A sandbox chooses its destinations (a name per
// DNS query through the TUN device), and a Summary lives as long as its
// run or session; refusals of later destinations are only counted
// (Unlisted).
const MaxRefusals = 1000

// Refusal is one refused destination ("host:port") and how often, with the
// rule and explanation of the first refusal.
type Refusal struct {
	Dest   string `json:"dest"`
	Count  int    `json:"count"`
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// Add counts one event.
func (s *Summary) Add(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Decision {
	case DecisionAllow:
		s.allowed++
	case DecisionDeny:
		dest := fmt.Sprintf("%s:%d", e.Host, e.Port)
		if e.Proto == ProtoDNS {
			dest = e.Host + " (DNS)"
		} else if e.Proto == ProtoUDP {
			dest = fmt.Sprintf("%s:%d (UDP)", e.Host, e.Port)
		}
		if s.refused == nil {
			s.refused = map[string]*Refusal{}
		}
		r := s.refused[dest]
		if r == nil {
			if len(s.refused) >= MaxRefusals {
				s.unlisted++
				return
			}
			r = &Refusal{Dest: dest, Rule: e.Rule, Reason: e.Reason}
			s.refused[dest] = r
		}
		r.Count++
	default:
		s.errors++
	}
}

// Refused lists the refused destinations, most often refused first.
func (s *Summary) Refused() []Refusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refusal, 0, len(s.refused))
	for _, r := range s.refused {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Dest < out[j].Dest
	})
	return out
}

// Unlisted is the number of refusals of destinations Refused leaves out
// (beyond the first MaxRefusals).
func (s *Summary) Unlisted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unlisted
}

// String is one line for a person, empty when nothing was refused, e.g.
// `network: refused denied.test:443 (default deny), 10.0.0.1:80 ×2
// (private address 10.0.0.1 (RFC 1918)); 5 connections allowed`.
func (s *Summary) String() string {
	refused := s.Refused()
	if len(refused) == 0 {
		return ""
	}
	const maxShown = 5
	var parts []string
	unlisted := s.Unlisted()
	for i, r := range refused {
		if i == maxShown {
			more := fmt.Sprintf("and %d more", len(refused)-maxShown)
			if unlisted > 0 {
				more += fmt.Sprintf(" (and %d refusals of further destinations)", unlisted)
			}
			parts = append(parts, more)
			break
		}
		count := ""
		if r.Count > 1 {
			count = fmt.Sprintf(" ×%d", r.Count)
		}
		parts = append(parts, fmt.Sprintf("%s%s (%s)", r.Dest, count, r.Rule))
	}
	s.mu.Lock()
	allowed, errors := s.allowed, s.errors
	s.mu.Unlock()
	line := "network: refused " + strings.Join(parts, ", ")
	line += fmt.Sprintf("; %d allowed", allowed)
	if errors > 0 {
		line += fmt.Sprintf(", %d failed", errors)
	}
	return line
}
