package client

import (
	"reflect"
	"testing"
)

// TestDefaultSockets: the first place is where the user's own daemon
// listens (DefaultSocket's choice), the rest where a daemon it may reach
// listens when not told otherwise.
func TestDefaultSockets(t *testing.T) {
	for _, tc := range []struct {
		uid  int
		env  map[string]string
		want []string
	}{
		{1000, nil, []string{"/tmp/moat-1000/moat.sock", "/run/moat/moat.sock", "/run/user/1000/moat.sock"}},
		{1000, map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "TMPDIR": "/var/tmp"},
			[]string{"/run/user/1000/moat.sock", "/var/tmp/moat-1000/moat.sock", "/run/moat/moat.sock", "/run/user/1000/moat.sock"}},
		{1000, map[string]string{"MOAT_SOCKET": "/srv/x/moat.sock", "XDG_RUNTIME_DIR": "relative", "TMPDIR": "relative"},
			[]string{"/srv/x/moat.sock", "/tmp/moat-1000/moat.sock", "/run/moat/moat.sock", "/run/user/1000/moat.sock"}},
		{0, map[string]string{"XDG_RUNTIME_DIR": "/run/user/0"},
			[]string{"/run/moat/moat.sock", "/run/user/0/moat.sock", "/tmp/moat-0/moat.sock", "/run/user/0/moat.sock"}},
	} {
		got := DefaultSockets(tc.uid, func(k string) string { return tc.env[k] })
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("uid %d, %v: %q, want %q", tc.uid, tc.env, got, tc.want)
		}
	}
	t.Setenv("MOAT_SOCKET", "/srv/y/moat.sock")
	if got := DefaultSocket(); got != "/srv/y/moat.sock" {
		t.Errorf("DefaultSocket with $MOAT_SOCKET: %q", got)
	}
}
