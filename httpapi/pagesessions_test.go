package httpapi

import (
	"net/http"
	"testing"

	"github.com/moatbox/moat/daemon"
)

// TestPageSessionsBounded: a tenant's page sessions are at most
// maxWebSessions; a login past that ends the tenant's oldest one, the
// newest stay valid (the control), and another tenant's are untouched.
func TestPageSessionsBounded(t *testing.T) {
	var a webAuth
	alice, bob := daemon.TokenTenant("alice"), daemon.TokenTenant("bob")
	valid := func(id string) bool {
		r, _ := http.NewRequest("GET", "http://moat.test/approvals", nil)
		r.Host = "moat.test"
		r.AddCookie(&http.Cookie{Name: cookieName, Value: id})
		_, _, _, ok := a.session(r, "")
		return ok
	}
	bobs, _ := a.newSession(bob, "moat.test", "http://moat.test")
	var ids []string
	for range maxWebSessions + 3 {
		id, _ := a.newSession(alice, "moat.test", "http://moat.test")
		ids = append(ids, id)
	}
	for i, id := range ids {
		if want := i >= 3; valid(id) != want {
			t.Errorf("alice's page session %d of %d: valid %v, want %v", i+1, len(ids), !want, want)
		}
	}
	if !valid(bobs) {
		t.Error("bob's page session ended by alice's logins")
	}
	n := 0
	for _, ws := range a.sessions {
		if ws.tenant.ID == alice.ID {
			n++
		}
	}
	if n != maxWebSessions {
		t.Errorf("alice has %d page sessions, want %d", n, maxWebSessions)
	}
}
