// Package fsid lets a process running as root touch the file system with
// another user's rights: a thread of it takes that user's filesystem
// identity (fsuid, fsgid, and the supplementary groups it is given), and
// the kernel then resolves and opens paths as it would for that user,
// root's capabilities to pass permission checks (CAP_DAC_OVERRIDE,
// CAP_DAC_READ_SEARCH, ...) dropped from the thread with its fsuid of 0.
//
// A daemon running as root uses it for the paths a local tenant names, so
// that what the tenant could not reach itself is refused as a missing path
// is, and tells it nothing about other users' files.
package fsid

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Take gives the calling thread, which the caller has locked
// (runtime.LockOSThread), the filesystem identity uid and gid with the
// supplementary groups in groups (none if empty), and returns what gives it
// back the process's. If restore fails, the thread's identity is
// unknown: the caller must leave it locked, so that it dies with its
// goroutine.
//
// The system calls are made raw: setgroups through the runtime changes
// every thread.
func Take(uid, gid int, groups []int) (restore func() error, err error) {
	own, err := unix.Getgroups()
	if err != nil {
		return nil, err
	}
	euid, egid := os.Geteuid(), os.Getegid()
	restore = func() error { return set(euid, egid, own) }
	if err := set(uid, gid, groups); err != nil {
		restore()
		return nil, err
	}
	return restore, nil
}

func set(uid, gid int, groups []int) error {
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
	// Both calls answer the previous value: asked again with an invalid
	// one, they say what holds.
	u, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
	g2, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0)
	if int(u) != uid || int(g2) != gid {
		return fmt.Errorf("fsuid %d fsgid %d, want %d %d", u, g2, uid, gid)
	}
	return nil
}

// Do runs fn on a thread of its own with the filesystem identity uid,
// gid and groups (see Take), and waits for it. The thread is not given
// back to the runtime: it ends with fn. fn must not start goroutines
// that touch the file system on its behalf (they would run with the
// process's rights).
func Do(uid, gid int, groups []int, fn func()) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with this goroutine, whatever
		// identity it was left with.
		runtime.LockOSThread()
		if _, err := Take(uid, gid, groups); err != nil {
			errc <- fmt.Errorf("take the filesystem identity of uid %d: %w", uid, err)
			return
		}
		defer func() { errc <- nil }()
		fn()
	}()
	return <-errc
}
