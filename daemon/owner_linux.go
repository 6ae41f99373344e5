package daemon

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/internal/fsid"
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
	// A workspace removed on the host is held open, empty: every
	// path would be "no such file", a new one's included.
	var rst unix.Stat_t
	if unix.Fstat(int(s.root.Fd()), &rst) == nil && rst.Nlink == 0 {
		release()
		return nil, fmt.Errorf("%w: the workspace directory was removed since the session began", ErrWorkspace)
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
	restore, err := fsid.Take(int(st.Uid), int(st.Gid), nil)
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
