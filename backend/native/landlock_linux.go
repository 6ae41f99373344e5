package native

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/hostinfo"
)

// landlockConfig is every file-system right and IPC scope go-landlock
// knows, downgraded to what the running kernel supports. TCP rights are
// handled only when the Spec restricts ports (network.tcp_bind and
// tcp_connect): otherwise the network namespace is the wall, and loopback
// servers a command starts for its own tests keep working.
var landlockConfig = landlock.Config{
	HandledAccessFS: landlock.V10.HandledAccessFS,
	Scoped:          landlock.V10.Scoped,
}.BestEffort()

// landlockMaxABI is the newest ABI go-landlock knows.
const landlockMaxABI = 10

// UsableLandlockABI is the Landlock ABI moat can enforce its rules with on
// this kernel, or 0. ABI 1 (Linux 5.13 to 5.18) counts as none: moat's
// rules grant the "refer" right on writable paths, which ABI 1 cannot
// handle, and go-landlock's best effort (which the direct start mirrors)
// then restricts nothing at all. Reporting ABI 1 as in force would be
// false, and filesystem.landlock = "required" would run unprotected.
func UsableLandlockABI() int { return usableLandlockABI(hostinfo.LandlockABI()) }

func usableLandlockABI(abi int) int {
	if abi < 2 {
		return 0
	}
	return min(abi, landlockMaxABI)
}

// restrictLandlock re-checks file access with Landlock, from the same
// Spec as the mounts, so that a mistake in the mount layer is not an
// escape: read-only binds get read and execute, writable binds and the
// sandbox's own tmpfs mounts get full access, directory listing is
// allowed everywhere, and nothing else is granted. Signals and abstract
// unix sockets are scoped to the sandbox (ABI 6). It runs in init after
// pivot_root (the paths are the sandbox's) and no_new_privs, on the locked
// thread that forks the command, which inherits the domain.
func restrictLandlock(spec *backend.Spec) error {
	// The same rules the direct start adds (landlockRules), as
	// go-landlock's: listing "/", RODirs for read-only mounts, RWDirs with
	// refer, ioctl on devices and unix socket resolution for writable ones,
	// and ROFiles or RWFiles with ioctl on devices for a bound file.
	var rules []landlock.Rule
	for _, r := range landlockRules(spec, false) {
		switch {
		case r.path == "/":
			rules = append(rules, landlock.PathAccess(ll.AccessFSReadDir, "/"))
		case r.file && r.access&ll.AccessFSWriteFile == 0:
			rules = append(rules, landlock.ROFiles(r.path).IgnoreIfMissing())
		case r.file:
			rules = append(rules, landlock.RWFiles(r.path).WithIoctlDev().IgnoreIfMissing())
		case r.access == llRead:
			rules = append(rules, landlock.RODirs(r.path).IgnoreIfMissing())
		default:
			rules = append(rules, landlock.RWDirs(r.path).WithRefer().WithIoctlDev().WithResolveUnix().IgnoreIfMissing())
		}
	}
	cfg := landlockConfig
	n := spec.Network
	if n.RestrictBind || n.RestrictConnect {
		// The sandbox package refuses such a Spec below ABI 4; this is
		// the backend's own check, so that no caller gets TCP rules
		// silently dropped.
		if abi, err := ll.LandlockGetABIVersion(); err != nil || abi < 4 {
			return fmt.Errorf("TCP port rules need Landlock ABI 4 (Linux 6.7); this kernel has %d", max(abi, 0))
		}
	}
	if n.RestrictBind {
		cfg.HandledAccessNet |= ll.AccessNetBindTCP
		for _, p := range n.BindPorts {
			rules = append(rules, landlock.BindTCP(uint16(p)))
		}
	}
	if n.RestrictConnect {
		cfg.HandledAccessNet |= ll.AccessNetConnectTCP
		for _, p := range n.ConnectPorts {
			rules = append(rules, landlock.ConnectTCP(uint16(p)))
		}
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
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
