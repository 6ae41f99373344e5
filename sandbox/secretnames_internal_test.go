package sandbox

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/moatbox/moat/policy"
)

// TestSecretNamesMoatSetsRefused: every variable moat sets in allow mode
// (the proxy's, the trust store's) is refused as a secret's name by the
// policy's validation, which keeps a list of its own: were one missing,
// moat's value would silently replace the secret's placeholder, or the
// placeholder the proxy's address. The control: another name passes.
func TestSecretNamesMoatSetsRefused(t *testing.T) {
	names := append(slices.Sorted(maps.Keys(proxyEnv(nil))), caEnv...)
	for _, name := range append(names, "GITHUB_TOKEN") {
		p := policy.Default()
		p.Network.Mode = policy.NetworkAllow
		p.Network.Allow = []string{"api.test"}
		p.Secrets = []policy.Secret{{Name: name, Source: "env:A", Hosts: []string{"api.test"}}}
		err := p.Validate()
		refused := err != nil && strings.Contains(err.Error(), "is set by moat")
		if refused != (name != "GITHUB_TOKEN") {
			t.Errorf("a secret named %s: %v", name, err)
		}
	}
}
