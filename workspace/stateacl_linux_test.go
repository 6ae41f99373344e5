package workspace

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStateDirWithACL: a state directory that a POSIX ACL opens to
// another user is refused (its mask shows as the group's bits, which the
// owner's own group made look safe; found by a tester). The control: the
// same directory without the ACL.
func TestStateDirWithACL(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MOAT_STATE_DIR", dir)
	if _, err := StateDir(); err != nil {
		t.Fatalf("control: %v", err)
	}
	checkedStateDirs.Delete(dir)
	// user::rwx user:65534:rwx group::--- mask::rwx other::---
	acl := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{1, 7, 0xffffffff}, {2, 7, 65534}, {4, 0, 0xffffffff}, {0x10, 7, 0xffffffff}, {0x20, 0, 0xffffffff}} {
		acl = binary.LittleEndian.AppendUint16(acl, e.tag)
		acl = binary.LittleEndian.AppendUint16(acl, e.perm)
		acl = binary.LittleEndian.AppendUint32(acl, e.id)
	}
	if err := unix.Setxattr(dir, "system.posix_acl_access", acl, 0); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			t.Skipf("this file system has no POSIX ACLs: %v", err)
		}
		t.Fatal(err)
	}
	if _, err := StateDir(); !errors.Is(err, ErrStateDirUnsafe) {
		t.Errorf("a state directory with an ACL for another user: %v, want it refused", err)
	}
}
