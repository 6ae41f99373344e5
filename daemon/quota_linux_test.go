package daemon

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDiskQuota(t *testing.T) {
	m := newManager(t, Config{TenantDisk: 100 << 20})
	a := TokenTenant("a")
	ctx := context.Background()
	for _, tc := range []struct {
		req  CreateRequest
		want string
	}{
		{CreateRequest{}, "set limits.disk"},
		{CreateRequest{Policy: "[limits]\ndisk = \"10MiB\"\n", WorkspaceMode: "copy"}, "written in place"},
		{CreateRequest{Policy: "[limits]\ndisk = \"200MiB\"\n", WorkspaceMode: "overlay"}, "over its 100MiB"},
	} {
		_, err := m.Create(ctx, a, &tc.req)
		if !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
	self := UIDTenant(os.Geteuid())
	if _, err := m.Create(ctx, self, &CreateRequest{Policy: "[limits]\ndisk = \"10MiB\"\n", Workspace: t.TempDir()}); !errors.Is(err, ErrQuota) ||
		!strings.Contains(err.Error(), `the workspace (workspace_mode "direct") is written in place`) {
		t.Errorf("a direct workspace of the tenant's: %v", err)
	}
	// An empty direct workspace: bounded by a tmpfs of its own where the
	// daemon can mount one (as root), and counted twice; else refused.
	direct := &CreateRequest{Policy: "[limits]\ndisk = \"20MiB\"\n"}
	if os.Geteuid() == 0 {
		s, err := m.Create(ctx, a, direct)
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Statfs_t
		if err := unix.Fstatfs(int(s.root.Fd()), &st); err != nil || st.Type != unix.TMPFS_MAGIC || int64(st.Blocks)*st.Bsize != 20<<20 {
			t.Errorf("the workspace is not a 20MiB tmpfs: %+v %v", st, err)
		}
		if s.disk != 40<<20 {
			t.Errorf("counted %d bytes, want twice limits.disk", s.disk)
		}
		ws := s.Workspace
		if err := m.Delete(ctx, a, s.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(ws); !os.IsNotExist(err) {
			t.Errorf("the workspace's tmpfs is left: %v", err)
		}
	} else if _, err := m.Create(ctx, a, direct); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "a daemon running as root would bound") {
		t.Errorf("an empty direct workspace, not root: %v", err)
	}
	ov := &CreateRequest{Policy: "[limits]\ndisk = \"60MiB\"\n", WorkspaceMode: "overlay"}
	s, err := m.Create(ctx, a, ov)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, a, ov); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "other sessions' 60MiB") {
		t.Errorf("second 60MiB: %v", err)
	}
	if _, err := m.Create(ctx, TokenTenant("b"), ov); err != nil {
		t.Errorf("another tenant: %v", err)
	}
	ro := &CreateRequest{Policy: "[limits]\ndisk = \"40MiB\"\n", WorkspaceMode: "readonly"}
	if _, err := m.Create(ctx, a, ro); err != nil {
		t.Errorf("readonly within the quota: %v", err)
	}
	m.Delete(ctx, a, s.ID)
	if _, err := m.Create(ctx, a, ov); err != nil {
		t.Errorf("after a delete: %v", err)
	}
}
