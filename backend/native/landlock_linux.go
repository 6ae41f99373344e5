package native

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/moatbox/moat/backend"
)

// landlockConfig is every file-system right and IPC scope go-landlock
// knows, downgraded to what the running kernel supports. TCP rights are
// not handled yet: with no network the namespace is the wall, and
// loopback servers a command starts for its own tests keep working.
var landlockConfig = landlock.Config{
	HandledAccessFS: landlock.V10.HandledAccessFS,
	Scoped:          landlock.V10.Scoped,
}.BestEffort()

// landlockMaxABI is the newest ABI go-landlock knows.
const landlockMaxABI = 10

// restrictLandlock re-checks file access with Landlock, from the same
// Spec as the mounts, so that a mistake in the mount layer is not an
// escape: read-only binds get read and execute, writable binds and the
// sandbox's own tmpfs mounts get full access, directory listing is
// allowed everywhere, and nothing else is granted. Signals and abstract
// unix sockets are scoped to the sandbox (ABI 6). It runs in init after
// pivot_root (the paths are the sandbox's) and no_new_privs, on the locked
// thread that forks the command, which inherits the domain.
func restrictLandlock(spec *backend.Spec) error {
	rules := []landlock.Rule{landlock.PathAccess(ll.AccessFSReadDir, "/")}
	rw := func(paths ...string) landlock.Rule {
		return landlock.RWDirs(paths...).WithRefer().WithIoctlDev().WithResolveUnix().IgnoreIfMissing()
	}
	for _, m := range spec.Mounts {
		if m.NoLandlockGrant {
			continue
		}
		switch m.Kind {
		case backend.MountBind, backend.MountOverlay:
			if m.ReadOnly {
				rules = append(rules, landlock.RODirs(m.Target).IgnoreIfMissing())
			} else {
				rules = append(rules, rw(m.Target))
			}
		case backend.MountTmpfs, backend.MountProc, backend.MountDev:
			if m.ReadOnly {
				rules = append(rules, landlock.RODirs(m.Target).IgnoreIfMissing())
			} else {
				rules = append(rules, rw(m.Target))
			}
		}
	}
	fd, flags, err := landlockConfig.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return nil // no Landlock on this kernel: nothing to restrict
	}
	defer unix.Close(fd)
	// Only this thread, the one that forks the command, enters the domain.
	// Restricting every thread one by one (as go-landlock does before ABI
	// 8) would put each thread in a sibling domain of its own, and signal
	// scoping would then stop init's signal forwarder, running on another
	// thread, from reaching the command.
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), uintptr(flags), 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}
