package daemon

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// useFiles holds the workspace root open, as useRoot, for a change or a
// read of the files API, which it makes with the workspace owner's
// rights: a daemon running as root serving another user locks the
// goroutine to its thread and gives the thread that user's filesystem
// identity (fsuid, fsgid, no supplementary groups) until done is called.
// The kernel then refuses what the owner could not do itself, such as
// reading or writing a closed directory of a third user's inside the
// workspace, which root's rights would reach; beneath the root as ever.
func (s *Session) useFiles() (done func(), err error) {
	release, err := s.useRoot()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 || s.Tenant.self() || s.Tenant.UID < 0 || s.TempWorkspace {
		// A workspace the daemon made (a token's tenant, which has no
		// host identity, has only those) is in its own directory, where
		// no third user's files are; its git config is read by path.
		return release, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(s.root.Fd()), &st); err != nil {
		release()
		return nil, err
	}
	runtime.LockOSThread()
	restore, err := actAs(int(st.Uid), int(st.Gid))
	if err != nil {
		// The thread's identity is unknown: it dies with its goroutine.
		release()
		return nil, fmt.Errorf("take the workspace owner's rights: %w", err)
	}
	return func() {
		if restore() == nil {
			runtime.UnlockOSThread()
		}
		release()
	}, nil
}

// actAs gives the calling thread, locked, the filesystem identity uid and
// gid with no supplementary groups, and returns what gives it back the
// daemon's.
// The system calls are made raw: setgroups through the runtime changes
// every thread.
func actAs(uid, gid int) (restore func() error, err error) {
	groups, err := unix.Getgroups()
	if err != nil {
		return nil, err
	}
	set := func(uid, gid int, groups []int) error {
		g := make([]uint32, len(groups))
		for i, v := range groups {
			g[i] = uint32(v)
		}
		var p unsafe.Pointer
		if len(g) > 0 {
			p = unsafe.Pointer(&g[0])
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(g)), uintptr(p), 0); e != 0 {
			return e
		}
		unix.RawSyscall(unix.SYS_SETFSGID, uintptr(gid), 0, 0)
		unix.RawSyscall(unix.SYS_SETFSUID, uintptr(uid), 0, 0)
		// Both calls answer the previous value: asked again with an
		// invalid one, they say what holds.
		u, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
		g2, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0)
		if int(u) != uid || int(g2) != gid {
			return fmt.Errorf("fsuid %d fsgid %d, want %d %d", u, g2, uid, gid)
		}
		return nil
	}
	euid, egid := os.Geteuid(), os.Getegid()
	restore = func() error { return set(euid, egid, groups) }
	if err := set(uid, gid, nil); err != nil {
		restore()
		return nil, err
	}
	return restore, nil
}
