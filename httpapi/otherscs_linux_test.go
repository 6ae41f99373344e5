package httpapi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// TestOthersChangeSetsBounded: a root daemon keeps the change set of a
// local user's overlay session in its own workspace in root's store, which
// the user cannot reach on the host, and does not review it for the user
// (it would read the user's files as root). Such a change set still holds
// what the session wrote: it counts in the user's disk quota, and the
// user can discard it through the API, which frees the quota. Controls:
// the same session fits before, and after the discard; the diff is still
// refused.
func TestOthersChangeSetsBounded(t *testing.T) {
	o := rootServingOther(t, "moat-otherscs-")
	uid, gid, base := o.uid, o.gid, o.base
	d := startDaemon(t, daemon.Config{TenantDisk: 12 << 20}, nil)
	own := filepath.Join(base, "own")
	os.Mkdir(own, 0o755)
	os.Chown(own, uid, gid)
	curl := func(args ...string) string { return string(o.curl(t, d.sock, args...)) }
	create := func() string {
		return curl("-d", `{"workspace":"`+own+`","workspace_mode":"overlay","policy":"[limits]\ndisk = \"8MiB\"\n"}`, "http://moat/v1/sessions")
	}
	out := create()
	if strings.Contains(out, "cannot id-map") {
		// /run is a tmpfs, which kernels before 6.3 cannot id-map (the
		// QEMU guest's).
		t.Skipf("the kernel cannot id-map %s's filesystem: %s", base, out)
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(out, `{"id":"`), `"`)
	if !strings.Contains(out, `"tenant":"uid:`) || len(id) != 16 {
		t.Fatalf("positive control: %s's overlay session in its own workspace: %s", o.name, out)
	}
	if out := curl("-d", `{"args":["dd","if=/dev/zero","of=big","bs=1M","count=6"]}`, "http://moat/v1/sessions/"+id+"/exec"); !strings.Contains(out, `"exit_code":0`) {
		t.Fatalf("6MiB in the session: %s", out)
	}
	// A diff refused while the session lives leaves it alive: a request
	// that changes nothing ends nothing (before, the review ended it and
	// killed its commands, and only then refused, tried).
	if out := curl("http://moat/v1/sessions/" + id + "/diff"); !strings.Contains(out, client.CodeUnsupported) {
		t.Errorf("the diff of a live session in another user's workspace: %s", out)
	}
	if out := curl("-d", `{"args":["echo","alive"]}`, "http://moat/v1/sessions/"+id+"/exec"); !strings.Contains(out, "alive") {
		t.Errorf("the session after a refused diff: %s", out)
	}
	curl("-X", "DELETE", "http://moat/v1/sessions/"+id)
	if out := curl("http://moat/v1/sessions/" + id + "/diff"); !strings.Contains(out, client.CodeUnsupported) {
		t.Errorf("the daemon diffs another user's change set: %s", out)
	}
	if out := create(); !strings.Contains(out, client.CodeQuota) {
		t.Errorf("8MiB more with 6MiB kept in root's store under 12MiB: %s", out)
		if over, _, ok := strings.Cut(strings.TrimPrefix(out, `{"id":"`), `"`); ok {
			curl("-X", "DELETE", "http://moat/v1/sessions/"+over)
		}
	} else if !strings.Contains(out, "review") {
		t.Errorf("the refusal does not say what holds the disk: %s", out)
	}
	if out := curl("-X", "POST", "http://moat/v1/sessions/"+id+"/discard"); out != "" {
		t.Errorf("%s discards its change set: %s", o.name, out)
	}
	if out := create(); !strings.Contains(out, `"tenant":"uid:`) {
		t.Errorf("positive control: the quota freed by the discard: %s", out)
	}
}
