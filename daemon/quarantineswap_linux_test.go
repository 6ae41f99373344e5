//go:build linux

package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/moatbox/moat/backend"
)

// TestQuarantineStaysInSwappedWorkspace: the daemon, as root, puts back
// a link on the way to a protected path (.cargo/config) that a session's
// command retargeted, and quarantines what it planted, when the session
// ends. The local user whose workspace it is can meanwhile change the
// workspace on the host, with its own rights: here it swaps .cargo for a
// link to a directory of root's, which it cannot write. Root must not
// make root's directory hold a config the user chose: the link goes back
// below the workspace, or nowhere. The positive control: the .envrc the
// command planted in the same session is quarantined out of the
// workspace, so the daemon did run the quarantine; and the user could not
// write root's directory itself.
func TestQuarantineStaysInSwappedWorkspace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a daemon running as root serves another user's own workspace")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv, to change the workspace as its user")
	}
	const tenant = 4242
	tn := UIDTenant(tenant)
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	m := newManager(t, Config{Engine: Sandboxes})
	ctx := context.Background()
	asTenant := func(script string, args ...string) error {
		cmd := exec.Command("setpriv", append([]string{"--reuid=" + strconv.Itoa(tenant), "--regid=" + strconv.Itoa(tenant), "--clear-groups", "sh", "-c", script, "sh"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: out}
		}
		return nil
	}

	// Root's directory, which the tenant cannot write.
	victim := t.TempDir()
	os.Chmod(victim, 0o755)
	if asTenant(`touch "$1/config"`, victim) == nil {
		t.Fatal("control: the tenant could write root's directory")
	}

	// Not t.TempDir: its parent is closed to the tenant. The workspace's
	// parent is root's, as the daemon requires (fixedAncestors).
	parent, err := os.MkdirTemp("", "moat-quarantine-swap-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	os.Chmod(parent, 0o755)
	ws := filepath.Join(parent, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(ws, tenant, tenant)
	if err := asTenant(`cd "$1" && mkdir .cargo && touch cfg.toml && ln -s ../cfg.toml .cargo/config`, ws); err != nil {
		t.Fatalf("the tenant's .cargo/config: %v", err)
	}
	s, err := m.Create(ctx, tn, &CreateRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Exec(ctx, &ExecRequest{Args: []string{"sh", "-c", "ln -sfn /tmp/elsewhere .cargo/config && echo planted > .envrc"}}, backend.Stdio{})
	if err != nil || rep.ExitCode != 0 {
		t.Fatalf("control: the command could not retarget .cargo/config and write .envrc: %v, %+v", err, rep)
	}
	if err := asTenant(`cd "$1" && mv .cargo aside && ln -s "$2" .cargo`, ws, victim); err != nil {
		t.Fatalf("the tenant could not swap its own .cargo: %v", err)
	}

	m.Delete(ctx, tn, s.ID) // an error (a link not put back) is fine here

	if _, err := os.Lstat(filepath.Join(victim, "config")); err == nil {
		t.Errorf("the daemon made root's %s/config, through the link the tenant put at .cargo", victim)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".envrc")); !os.IsNotExist(err) {
		t.Errorf("control: the .envrc the command planted was not quarantined: %v", err)
	}
}

// TestSwappableWorkspaceRefused: the quarantine, and every mount of a
// session, start from the workspace's path, so a local user must not be
// able to swap the workspace itself (or a directory above it) for a link
// to another directory while its session ends. The daemon refuses a
// workspace whose parent the user could rename in (fixedAncestors). The
// positive control: the same workspace below a directory of root's is
// served, and there the user's own rename of it fails.
func TestSwappableWorkspaceRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a daemon running as root serves another user's own workspace")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv, to rename as the workspace's user")
	}
	const tenant = 4242
	tn := UIDTenant(tenant)
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	m := newManager(t, Config{Engine: Sandboxes})
	ctx := context.Background()
	for _, theirs := range []bool{true, false} {
		parent, err := os.MkdirTemp("", "moat-swappable-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(parent) })
		os.Chmod(parent, 0o755)
		if theirs {
			os.Chown(parent, tenant, tenant)
		}
		ws := filepath.Join(parent, "ws")
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chown(ws, tenant, tenant)
		s, err := m.Create(ctx, tn, &CreateRequest{Workspace: ws})
		if theirs {
			if !errors.Is(err, ErrWorkspace) {
				t.Errorf("a workspace in a directory of the tenant's was served: %v", err)
			}
			if err == nil {
				m.Delete(ctx, tn, s.ID)
			}
			continue
		}
		if err != nil {
			t.Fatalf("control: a workspace below root's directory was refused: %v", err)
		}
		mv := exec.Command("setpriv", "--reuid="+strconv.Itoa(tenant), "--regid="+strconv.Itoa(tenant), "--clear-groups", "mv", ws, ws+".aside")
		if mv.Run() == nil {
			t.Errorf("control: the tenant could rename its workspace out of root's directory")
		}
		m.Delete(ctx, tn, s.ID)
	}
}
