//go:build linux

package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIdmapUserns checks both ways of getting a user namespace for an
// idmapped mount (a holder stopped at exec by PTRACE_TRACEME, and the
// fallback that runs this binary as a holder): a file owned by uid:gid
// 1000:1000 must appear owned by the mapped host ids through the mount.
func TestIdmapUserns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("idmapped mounts need root on the host (the rootless path does not use them)")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(file, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	const host = 2000000000
	for _, stopped := range []bool{true, false} {
		ns, err := holdUserns(1000, 1000, host, host+1, stopped)
		if err != nil {
			t.Fatalf("stopped=%v: %v", stopped, err)
		}
		tree, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
		err = unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr)
		ns.Close()
		if err != nil {
			unix.Close(tree)
			t.Fatalf("stopped=%v: mount_setattr: %v", stopped, err)
		}
		var st unix.Stat_t
		err = unix.Fstatat(tree, "f", &st, 0)
		unix.Close(tree)
		if err != nil {
			t.Fatal(err)
		}
		if st.Uid != host || st.Gid != host+1 {
			t.Errorf("stopped=%v: through the idmapped mount f is %d:%d, want %d:%d", stopped, st.Uid, st.Gid, host, host+1)
		}
	}
}

// TestIDMappedSourceRefusedClearly: a workspace on a mount that is
// id-mapped already (as a container runtime may give one) cannot be
// mapped again; root is refused with a message that says so, not with a
// bare "operation not permitted" or a wrong blame on the filesystem.
func TestIDMappedSourceRefusedClearly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("idmapped mounts need root on the host (the rootless path does not use them)")
	}
	src, ws := t.TempDir(), t.TempDir()
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ns, err := idmapUserns(0, 0, 3000000000, 3000000000, onStartThread)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		t.Fatalf("make an idmapped mount: %v", err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, ws, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(ws, unix.MNT_DETACH)
	if !idmappedMount(ws) {
		t.Fatalf("%s is not seen as an idmapped mount", ws)
	}
	if idmappedMount(src) {
		t.Errorf("%s is seen as an idmapped mount", src)
	}
	err = CheckIDMap(ws, 2000000000, 2000000000)
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(fmt.Sprint(err), "id-mapped already") {
		t.Errorf("a workspace on an idmapped mount: %v", err)
	}
}
