package egress

import (
	"fmt"
	"net"
	"sort"
	"strconv"
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
	// Inner is the part of a connection's bytes that the events of the
	// requests read inside it (ProtoIntercepted) count already.
	Inner int64 `json:"-"`
}

// Spent is what e adds to a count of bytes over every event: its bytes
// but those its inner requests' events count.
func (e Event) Spent() int64 { return e.BytesUp + e.BytesDown - e.Inner }

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
	// failed: the first destinations that could not be reached, with
	// why, for the line: a client such as curl shows only "CONNECT
	// tunnel failed, response 502" and not the body that says why.
	failed []Refusal
	// bad: the first destinations the client sent requests to that the
	// proxy could not read (malformed, too large, too slow), which are
	// the client's failures, not the destination's.
	bad []Refusal
}

// clientFault reports whether an error event's rule is one the client's
// request caused (badRequest's rules).
func clientFault(rule string) bool {
	return rule == "bad request" || rule == "header too large" || rule == "header timeout"
}

// maxShown bounds the destinations String lists by name, of each kind.
const maxShown = 5

// MaxRefusals bounds the refused destinations a Summary lists one by one:
// the first ones refused. A sandbox chooses its destinations (a name per
// DNS query through the TUN device), and a Summary lives as long as its
// run or session; refusals of later destinations are only counted
// (Unlisted).
const MaxRefusals = 1000

// Refusal is one refused destination ("host:port") and rule, how often,
// and the explanation of the first such refusal.
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
		dest := e.dest()
		if s.refused == nil {
			s.refused = map[string]*Refusal{}
		}
		// By destination and rule: one destination refused for several
		// reasons (a secret's path, then its method) is listed with each.
		key := dest + "\x00" + e.Rule
		r := s.refused[key]
		if r == nil {
			if len(s.refused) >= MaxRefusals {
				s.unlisted++
				return
			}
			r = &Refusal{Dest: dest, Rule: e.Rule, Reason: e.Reason}
			s.refused[key] = r
		}
		r.Count++
	default:
		s.errors++
		if e.Host == "" {
			return // a request that named no destination (a bad one)
		}
		dest := e.dest()
		list := &s.failed
		if clientFault(e.Rule) {
			list = &s.bad
		}
		for i := range *list {
			if (*list)[i].Dest == dest {
				(*list)[i].Count++
				return
			}
		}
		if len(*list) < maxShown {
			*list = append(*list, Refusal{Dest: dest, Count: 1, Rule: e.Rule, Reason: e.Reason})
		}
	}
}

// dest names e's destination for a person: "host:port", with what it
// was when not a TCP connection.
func (e *Event) dest() string {
	switch e.Proto {
	case ProtoDNS:
		return e.Host + " (DNS)"
	case ProtoUDP:
		return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) + " (UDP)"
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) // an IPv6 address in brackets
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
		if out[i].Dest != out[j].Dest {
			return out[i].Dest < out[j].Dest
		}
		return out[i].Rule < out[j].Rule
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

// String is one line for a person, empty when nothing was refused and no
// destination could not be reached, e.g. `network: refused denied.test:443 (default deny),
// 10.0.0.1:80 ×2 (private address 10.0.0.1 (RFC 1918)); could not reach
// gone.test:443 (resolve gone.test: no such host); 5 allowed, 1 failed`.
func (s *Summary) String() string {
	refused := s.Refused()
	s.mu.Lock()
	allowed, errors := s.allowed, s.errors
	failed := append([]Refusal(nil), s.failed...)
	bad := append([]Refusal(nil), s.bad...)
	s.mu.Unlock()
	if len(refused) == 0 && len(failed) == 0 && len(bad) == 0 {
		return "" // failures that named no destination are only counted
	}
	var sections []string
	if len(refused) > 0 {
		sections = append(sections, "refused "+s.listRefused(refused))
	}
	list := func(rs []Refusal) string {
		var parts []string
		for _, f := range rs {
			why := f.Reason
			if why == "" {
				why = f.Rule
			}
			count := ""
			if f.Count > 1 {
				count = fmt.Sprintf(" ×%d", f.Count)
			}
			parts = append(parts, fmt.Sprintf("%s%s (%s)", f.Dest, count, why))
		}
		return strings.Join(parts, ", ")
	}
	if len(failed) > 0 {
		sections = append(sections, "could not reach "+list(failed))
	}
	if len(bad) > 0 {
		sections = append(sections, "could not read the client's requests to "+list(bad))
	}
	line := "network: " + strings.Join(sections, "; ")
	line += fmt.Sprintf("; %d allowed", allowed)
	if errors > 0 {
		line += fmt.Sprintf(", %d failed", errors)
	}
	return line
}

// listRefused is String's list of refused destinations.
func (s *Summary) listRefused(refused []Refusal) string {
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
	return strings.Join(parts, ", ")
}
