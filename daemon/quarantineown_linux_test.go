//go:build linux

package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// TestOwnWorkspaceQuarantineNotKept: what a command plants where a
// protected path belongs in a local user's own direct workspace is
// quarantined when its session ends, into the daemon's state directory,
// which is root's: the user can neither review nor remove it there, no
// quota counts it, and the move frees the user's own disk for the next
// session to fill again. The daemon removes it, and the session's events
// say so rather than name a place nobody may look. The positive control:
// the same plant by the daemon's own user, whose state directory it is,
// is kept there, as a run of moat's own would keep it, and named.
func TestOwnWorkspaceQuarantineNotKept(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a daemon running as root serves another user's own workspace")
	}
	const tenant = 4242
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state) // where the sandbox quarantines
	quarantine := filepath.Join(state, "quarantine")
	m := newManager(t, Config{Engine: Sandboxes})
	ctx := context.Background()

	plant := func(tn Tenant) []Event {
		t.Helper()
		// Not t.TempDir: its parent is closed to the tenant, which
		// reaches the workspace with its own rights.
		parent, err := os.MkdirTemp("", "moat-quarantine-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(parent) })
		os.Chmod(parent, 0o755)
		ws := filepath.Join(parent, "ws")
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chown(ws, tn.UID, tn.UID)
		s, err := m.Create(ctx, tn, &CreateRequest{Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := s.Exec(ctx, &ExecRequest{Args: []string{"sh", "-c", "mkdir .vscode && dd if=/dev/zero of=.vscode/junk bs=1M count=2 2>/dev/null"}}, backend.Stdio{})
		if err != nil || rep.ExitCode != 0 {
			t.Fatalf("control: the command could not write .vscode/junk: %v, %+v", err, rep)
		}
		if fi, err := os.Stat(filepath.Join(ws, ".vscode", "junk")); err != nil || fi.Size() != 2<<20 {
			t.Fatalf("control: .vscode/junk in the workspace: %v", err)
		}
		if o := statOwner(t, filepath.Join(ws, ".vscode")); o != tn.UID {
			t.Fatalf("control: .vscode is owned by %d, not the tenant's %d", o, tn.UID)
		}
		if err := m.Delete(ctx, tn, s.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(ws, ".vscode")); !os.IsNotExist(err) {
			t.Fatalf("control: .vscode was not quarantined out of the workspace: %v", err)
		}
		evs, _, _ := s.Events(ctx, 0, false)
		return evs
	}
	said := func(evs []Event, what string) bool {
		for _, e := range evs {
			if strings.Contains(string(e.Record), what) {
				return true
			}
		}
		return false
	}

	evs := plant(UIDTenant(tenant))
	if files := regularFiles(t, quarantine); len(files) > 0 {
		t.Errorf("another user's session left %q in the daemon's quarantine", files)
	}
	if !said(evs, "removed, so that no host tool runs it") || said(evs, quarantine) {
		t.Errorf("the session's events do not say that .vscode was removed, or still name the quarantine: %s", records(evs))
	}

	evs = plant(UIDTenant(os.Geteuid()))
	if files := regularFiles(t, quarantine); len(files) != 1 || !strings.HasSuffix(files[0], "/ws/.vscode/junk") {
		t.Errorf("control: the daemon's own user's quarantine holds %q, want its .vscode/junk kept", files)
	}
	if !said(evs, "moved to "+quarantine) {
		t.Errorf("control: the events do not say where .vscode went: %s", records(evs))
	}
}

// TestQuarantineRemovedOnlyTheTenants: of a quarantine the daemon would
// remove for a tenant, only what the tenant owns goes. The sandbox
// quarantines through the workspace's path, which the tenant can change on
// the host as the session ends: what a link put on the way brought in is
// not the tenant's to lose, and stays. The positive control: the
// tenant's own entry, beside it, goes, and the report says so.
func TestQuarantineRemovedOnlyTheTenants(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: entries of two owners")
	}
	const tenant = 4242
	q := filepath.Join(t.TempDir(), "quarantine", "run", "0", "ws")
	mine, other := filepath.Join(q, ".vscode"), filepath.Join(q, ".envrc")
	if err := os.MkdirAll(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(mine, "f"), []byte("x"), 0o644)
	os.WriteFile(other, []byte("x"), 0o644)
	for _, p := range []string{mine, filepath.Join(mine, "f")} {
		if err := os.Lchown(p, tenant, tenant); err != nil {
			t.Fatal(err)
		}
	}
	rep := &sandbox.Report{Quarantined: []workspace.Quarantined{
		{Path: ".vscode", To: mine, Why: "planted"}, {Path: ".envrc", To: other, Why: "planted"},
	}}
	removeQuarantined(rep, tenant, "gone")
	if _, err := os.Lstat(mine); !os.IsNotExist(err) {
		t.Errorf("control: the tenant's own entry was not removed: %v", err)
	}
	if rep.Quarantined[0].To != "" {
		t.Errorf("control: the report still names where the tenant's entry went: %+v", rep.Quarantined[0])
	}
	if _, err := os.Lstat(other); err != nil {
		t.Errorf("an entry the tenant does not own was removed: %v", err)
	}
	if rep.Quarantined[1].To != other {
		t.Errorf("the report no longer says where the entry it kept is: %+v", rep.Quarantined[1])
	}
}

// regularFiles lists the regular files below dir (none if it is missing).
func regularFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, p)
		}
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

func records(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.Write(e.Record)
		b.WriteByte('\n')
	}
	return b.String()
}
