package native

import (
	"testing"

	"github.com/moatbox/moat/backend"
)

// TestLandlockGrantsFileMounts: a file mount outside every granted tree
// (at the end of /etc's links: /run/systemd/resolve/stub-resolv.conf)
// gets a read rule of its own, or Landlock left the command unable to
// read the resolver moat mounted there (found under systemd-resolved);
// one inside a granted tree (/etc/passwd under /etc) needs none.
func TestLandlockGrantsFileMounts(t *testing.T) {
	spec := &backend.Spec{Mounts: []backend.Mount{
		{Kind: backend.MountBind, Source: "/etc", Target: "/etc", ReadOnly: true},
		{Kind: backend.MountFile, Target: "/etc/passwd", Data: "x"},
		{Kind: backend.MountFile, Target: "/run/systemd/resolve/stub-resolv.conf", Data: "x"},
	}}
	got := map[string]bool{}
	for _, r := range landlockRules(spec, false) {
		got[r.path] = r.file
	}
	if file, ok := got["/run/systemd/resolve/stub-resolv.conf"]; !ok || !file {
		t.Errorf("no file rule for the resolver outside /etc: %v", got)
	}
	if _, ok := got["/etc/passwd"]; ok {
		t.Errorf("a rule for /etc/passwd, which /etc's grants: %v", got)
	}
}
