package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestOwnerCheckedOnWhatIsMounted: a caller that names paths for another
// user (a daemon's tenant, Caller.Owner) has them mounted only when what
// they lead to is that user's, as the sandbox is made: a workspace or a
// writable path that is (or links to) another user's directory is
// refused, however it passed a check made earlier. The controls: the
// same run in the tenant's own directory works, and its writes land as
// the tenant's. As an ordinary user, where the owner cannot be checked on
// what is mounted, such a run is refused.
func TestOwnerCheckedOnWhatIsMounted(t *testing.T) {
	const tenant = 4242
	// Not t.TempDir: its parent is closed to the tenant, whose rights
	// the paths it names are looked at with.
	base, err := os.MkdirTemp("", "moat-owner-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	mine, theirs := filepath.Join(base, "mine"), filepath.Join(base, "theirs")
	for _, d := range []string{mine, theirs, filepath.Join(mine, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(mine, "root"), 0o755); err != nil { // root's, in the tenant's workspace
		t.Fatal(err)
	}
	if err := os.Symlink(theirs, filepath.Join(mine, "link")); err != nil {
		t.Fatal(err)
	}
	run := func(ws string, edit func(*policy.Policy)) (*sandbox.Report, string, error) {
		p := policy.Default()
		p.Workspace.Path = ws
		if edit != nil {
			edit(p)
		}
		if err := p.Resolve(ws, ""); err != nil {
			t.Fatal(err)
		}
		caller := sandbox.CurrentCaller()
		caller.Cwd, caller.Owner = ws, tenant
		var errb bytes.Buffer
		rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Caller: &caller,
			Args: []string{"sh", "-c", "touch made"}}, backend.Stdio{Stderr: &errb})
		return rep, errb.String(), err
	}
	if os.Geteuid() != 0 {
		if _, stderr, err := run(base, nil); err == nil || !strings.Contains(err.Error(), "unless moat runs as root") {
			t.Fatalf("as an ordinary user: %v, want a refusal (%s)", err, stderr)
		}
		return
	}
	for _, d := range []string{mine, filepath.Join(mine, "sub")} {
		if err := os.Chown(d, tenant, tenant); err != nil {
			t.Fatal(err)
		}
	}
	// The controls: the tenant's own workspace, and a writable path of its own.
	rep, stderr, err := run(mine, func(p *policy.Policy) { p.Filesystem.ReadWrite = []string{filepath.Join(mine, "sub")} })
	if err != nil || rep.ExitCode != 0 {
		t.Fatalf("the tenant's own workspace: %v %+v\n%s", err, rep, stderr)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(mine, "made"), &st); err != nil || st.Uid != tenant {
		t.Errorf("the command's file: %v, owned by %d, want the tenant %d", err, st.Uid, tenant)
	}
	for name, tc := range map[string]struct {
		ws   string
		edit func(*policy.Policy)
	}{
		"another's workspace": {theirs, nil},
		"a writable link":     {mine, func(p *policy.Policy) { p.Filesystem.ReadWrite = []string{filepath.Join(mine, "link")} }},
		"a read-only one": {mine, func(p *policy.Policy) {
			p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, filepath.Join(mine, "root"))
		}},
	} {
		_, _, err := run(tc.ws, tc.edit)
		if err == nil || !strings.Contains(err.Error(), "is not owned by uid 4242") {
			t.Errorf("%s: %v, want a refusal naming the owner", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(theirs, "made")); err == nil {
		t.Error("the command wrote into another's directory")
	}
}
