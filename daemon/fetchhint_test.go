package daemon

import (
	"strings"
	"testing"

	"github.com/moatbox/moat/policy"
)

// TestFetchHintIsValid: the refusal of a fetch in a session without
// network names a setting the policy takes: allow for a name,
// allow_cidrs for an address (allow refuses addresses).
func TestFetchHintIsValid(t *testing.T) {
	p := policy.Default()
	for host, want := range map[string]string{
		"example.org": `with "example.org" in [network] allow`,
		"127.0.0.1":   `with "127.0.0.1/32" in [network] allow_cidrs`,
		"[::1]":       `with "::1/128" in [network] allow_cidrs`,
	} {
		if got := networkRefuses(p, host, 443); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}
