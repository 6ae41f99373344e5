//go:build linux

package httpapi_test

import (
	"context"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// TestWebLoginCodesPerTenant: the bound on login links not used yet is
// each tenant's, so that one tenant asking for links without end (its
// own 429 the positive control) leaves another's page login working.
func TestWebLoginCodesPerTenant(t *testing.T) {
	tokens := aliceAndBob(t, "tok-a", "tok-b")
	d := startDaemon(t, daemon.Config{Approvals: true}, tokens)
	ctx := context.Background()
	alice, bob := client.TCP(d.tcp, "tok-a"), client.TCP(d.tcp, "tok-b")
	defer alice.Close()
	defer bob.Close()
	refused := false
	for i := 0; i < 1000 && !refused; i++ {
		if _, err := alice.WebLogin(ctx); err != nil {
			if apiCode(err) != client.CodeQuota {
				t.Fatalf("alice's login link %d: %v", i, err)
			}
			refused = true
		}
	}
	if !refused {
		t.Fatal("alice got 1000 login links unused: no bound")
	}
	if _, err := bob.WebLogin(ctx); err != nil {
		t.Errorf("bob's login link after alice's: %v", err)
	}
}
