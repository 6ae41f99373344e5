package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// ErrFetchRefused is returned (wrapped) for a fetch that egress.Fetcher
// refuses or that fails: not public HTTPS, a redirect, too slow, too big.
var ErrFetchRefused = errors.New("fetch refused")

// Fetch is the webhook-style request agent platforms offer beside a
// sandbox's commands (moat fetch, MCP's fetch tool), made for the session
// by the daemon on the host: a GET of a public https:// URL, no
// redirects, 5 s, 1 MiB (egress.Fetcher). The session's [network] decides
// it first, as it decides its commands' requests (none refuses it; allow,
// its lists), then its host rules, as they decide its proxy's requests: a
// deny refuses it (sandbox.ErrDenied), an ask waits for the request's
// approver (see WithApprover), else the session's pending approvals, else
// refuses it. Every decision other than a plain allow is audited with the
// session's records.
func (s *Session) Fetch(ctx context.Context, rawURL string) (*egress.FetchResult, error) {
	if err := s.begin(false); err != nil {
		return nil, err
	}
	defer s.finish(false)
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: %q is not a URL: give an https:// URL with a host name", ErrBadRequest, rawURL)
	}
	if u.Scheme != "https" {
		// Said before what the network allows, in the fetcher's words:
		// no policy lets it through.
		return nil, fmt.Errorf("%w: only https:// URLs are fetched, not %q", ErrFetchRefused, u.Scheme+"://")
	}
	port := 443
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("%w: %q: bad port", ErrBadRequest, rawURL)
		}
	}
	pol := s.Policy()
	host := strings.ToLower(u.Hostname())
	// A secret's placeholder in the URL is an attempt to send it where
	// the proxy would not (a fetch adds no secret): refused, and audited
	// as the proxy's refusal of the same request is.
	if sc, ok := s.eng.(fetchScrubber); ok {
		if err := sc.CheckFetchURL(u); err != nil {
			why := err.(*egress.FetchError).Reason
			s.recordDecision(audit.Decision{Type: audit.TypeDecision, Time: time.Now().UTC(), RunID: s.ID, At: "fetch",
				Command: []string{"FETCH", rawURL}, Verdict: string(harness.Deny), Reason: why, Rule: "secret placeholder", Outcome: "denied"})
			return nil, fmt.Errorf("%w: %s", sandbox.ErrDenied, why)
		}
	}
	if why := networkRefuses(pol, host, port); why != "" {
		// The fetch is a request of the session's: what its [network]
		// refuses its commands, it refuses the fetch, and the host rules
		// only narrow what that allows, as for the proxy.
		s.recordDecision(audit.Decision{Type: audit.TypeDecision, Time: time.Now().UTC(), RunID: s.ID, At: "fetch",
			Command: []string{"FETCH", rawURL}, Verdict: string(harness.Deny), Reason: why, Rule: "[network]", Outcome: "denied"})
		return nil, fmt.Errorf("%w: %s", sandbox.ErrDenied, why)
	}
	rules := harness.New(pol)
	d := rules.DecideHost(harness.Request{Host: host, Port: port, Method: "GET", Path: u.Path})
	if d.Verdict != harness.Allow {
		what := []string{"FETCH", rawURL}
		rec := audit.Decision{Type: audit.TypeDecision, Time: time.Now().UTC(), RunID: s.ID, At: "fetch", Command: what, Verdict: string(d.Verdict), Reason: d.Reason, Rule: d.Rule.String()}
		refuse := func(why string) error {
			s.recordDecision(rec)
			return fmt.Errorf("%w: rule %s %s %s%s; %s", sandbox.ErrDenied, d.Rule, d.Verdict.Verb(), host, sandbox.Because(d), why)
		}
		if d.Verdict == harness.Deny {
			rec.Outcome = "denied"
			return nil, refuse("change the policy's [[rules]] to allow it")
		}
		ap := approverOf(ctx)
		if ap == nil {
			ap = s.approver()
		}
		if ap == nil {
			rec.Outcome = sandbox.ApprovalNoApprover
			return nil, refuse("nobody can be asked here")
		}
		ok, err := ap.Approve(ctx, harness.Action{Request: &harness.Request{Host: host, Port: port, Method: "GET", Path: u.Path}}, d)
		if !ok {
			rec.Outcome = sandbox.ApprovalDenied
			return nil, refuse(fmt.Sprintf("not approved (%v)", err))
		}
		rec.Outcome, rec.Approver = sandbox.ApprovalApproved, ap.Name()
		s.recordDecision(rec)
		if err := s.m.auditErr(); err != nil {
			return nil, fmt.Errorf("%w: the fetch of %s was approved; %s", sandbox.ErrDenied, host, sandbox.Unrecorded(err))
		}
	}
	// It is a request of the session's to host: its request and network
	// budgets count it, as they count its commands' requests.
	if err := s.SpendRequest(host); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFetchRefused, err)
	}
	f := &egress.Fetcher{AllowCIDRs: pol.Network.AllowCIDRs} // the private ranges the policy lets its commands reach
	if s.m.cfg.Fetcher != nil {
		c := *s.m.cfg.Fetcher
		f = &c
	}
	sc, scrubs := s.eng.(fetchScrubber)
	if scrubs {
		// A refusal quotes what the server sent (a redirect's Location,
		// a malformed header line): the session's secrets' values never
		// reach the caller there either.
		f.Scrub = sc.ScrubText
	}
	r, err := f.Fetch(ctx, rawURL)
	s.SpendFetched(rawURL, r)
	if fe, ok := errors.AsType[*egress.FetchError](err); ok {
		return nil, fmt.Errorf("%w: %s", ErrFetchRefused, fe.Reason) // not "fetch refused" twice
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFetchRefused, err)
	}
	// The session's secrets' values never reach the caller, who is the
	// agent: a server its commands sent one to could echo it back.
	if scrubs {
		if err := sc.ScrubFetched(r); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrFetchRefused, err.(*egress.FetchError).Reason)
		}
	} else if len(pol.Secrets) > 0 {
		return nil, fmt.Errorf("%w: this session's sandbox cannot keep its secrets out of a fetch", ErrFetchRefused)
	}
	return r, nil
}

// networkRefuses says why the policy's [network] refuses the session a
// request to host:port, "" when it allows it: none refuses every one,
// allow what its lists do not allow (egress.Rules, the proxy's
// decision), host none.
func networkRefuses(p *policy.Policy, host string, port int) string {
	switch p.Network.Mode {
	case policy.NetworkHost:
		return ""
	case policy.NetworkAllow:
		rules, err := egress.ParseRules(p.Network.Allow, p.Network.Deny, p.Network.AllowCIDRs)
		if err != nil {
			return fmt.Sprintf("the policy's [network] lists: %v", err)
		}
		if v := rules.Decide(egress.Dest{Host: host, Port: port}); !v.Allow {
			return v.Reason
		}
		return ""
	}
	what := fmt.Sprintf("with %q in [network] allow", host)
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		// allow takes names; an address is reached through allow_cidrs
		// (a private one only so).
		what = fmt.Sprintf("with %q in [network] allow_cidrs", netip.PrefixFrom(a, a.BitLen()).String())
	}
	return fmt.Sprintf("the session has no network ([network] mode = %q), and a fetch is a request of the session's: to allow %s, set [network] mode = \"allow\" %s", p.Network.Mode, host, what)
}

// SpendRequest counts a request the daemon makes for s to host (a
// fetch: Fetch, MCP's fetch tool) against the session's [budgets]
// requests and network, as its proxy counts its commands' requests, and
// refuses it past them (a *harness.BudgetError naming the budget).
func (s *Session) SpendRequest(host string) error {
	if sp, ok := s.eng.(requestSpender); ok {
		return sp.SpendRequest(host)
	}
	return nil
}

// SpendFetched adds what a fetch of rawURL made for s moved to the
// session's network budget: up, little more than the URL; down, the
// page (r is nil when nothing came back).
func (s *Session) SpendFetched(rawURL string, r *egress.FetchResult) {
	sp, ok := s.eng.(requestSpender)
	if !ok {
		return
	}
	n := int64(len(rawURL))
	if r != nil {
		n += int64(len(r.Body))
	}
	sp.SpendNetwork(n)
}

// recordDecision sends a decision of the session's rules where the
// others go: the daemon's audit stream and the session's events.
func (s *Session) recordDecision(d audit.Decision) {
	s.audit(d)
}
