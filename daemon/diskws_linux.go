package daemon

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
)

// mountTmpfs mounts a tmpfs of size bytes on the directory dir, with
// dir's owner and mode 0700.
func mountTmpfs(dir string, size int64) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	opts := backend.TmpfsOptions(size) + ",mode=0700,uid=" + strconv.Itoa(int(st.Uid)) + ",gid=" + strconv.Itoa(int(st.Gid))
	if err := unix.Mount("moat-workspace", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount a tmpfs of %d bytes on the workspace: %w", size, err)
	}
	return nil
}

// tmpfsFull says whether the tmpfs of size bytes that root is the root of
// (mountTmpfs) is out of space or inodes, as the sandbox tells its own
// disk limit's.
func tmpfsFull(root *os.File, size int64) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(root.Fd()), &st); err != nil {
		return false
	}
	return backend.DiskFull(int64(st.Bavail)*st.Bsize, size) || backend.InodesFull(st.Ffree, st.Files)
}

// unmountWorkspace detaches what is mounted on a workspace the daemon
// made, if anything; the sandboxes that still hold it keep it until they
// end.
func unmountWorkspace(dir string) {
	if os.Geteuid() == 0 {
		unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	}
}
