package hostinfo

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Kernel is the running kernel's release.
func Kernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// KernelVersion is the running kernel's major and minor version, 0, 0 when
// its release does not start with "major.minor".
func KernelVersion() (major, minor int) {
	if _, err := fmt.Sscanf(Kernel(), "%d.%d", &major, &minor); err != nil {
		return 0, 0
	}
	return major, minor
}

func readInt(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// UserNamespaces reports the sysctls that can forbid user namespaces. The
// definitive check is starting a sandbox, which `moat doctor` also does.
func UserNamespaces() UserNS {
	if n, ok := readInt("/proc/sys/user/max_user_namespaces"); ok && n == 0 {
		return UserNS{Detail: "user.max_user_namespaces is 0; set it above 0 (sysctl -w user.max_user_namespaces=15000)"}
	}
	if os.Geteuid() != 0 {
		if n, ok := readInt("/proc/sys/kernel/unprivileged_userns_clone"); ok && n == 0 {
			return UserNS{Detail: "kernel.unprivileged_userns_clone is 0; enable it (sysctl -w kernel.unprivileged_userns_clone=1) or run moat as root"}
		}
		if n, ok := readInt("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); ok && n == 1 {
			return UserNS{Detail: "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1); add an AppArmor profile for moat allowing userns, or run moat as root"}
		}
		return UserNS{Usable: true, Detail: "unprivileged user namespaces allowed"}
	}
	return UserNS{Usable: true, Detail: "available (caller is root; unprivileged ones: " + unprivilegedState() + ")"}
}

func unprivilegedState() string {
	if n, ok := readInt("/proc/sys/kernel/unprivileged_userns_clone"); ok && n == 0 {
		return "disabled by kernel.unprivileged_userns_clone"
	}
	if n, ok := readInt("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); ok && n == 1 {
		return "restricted by AppArmor"
	}
	return "allowed"
}

// LandlockABI is the kernel's Landlock ABI version, 0 when absent or
// disabled.
func LandlockABI() int {
	const createRulesetVersion = 1
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// Seccomp reports whether seccomp filters are available.
func Seccomp() bool {
	_, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	if err != nil {
		return false
	}
	_, err = os.Stat("/proc/sys/kernel/seccomp/actions_avail")
	return err == nil
}

// Missing lists the system calls every sandbox needs that are not
// available here, each with the Linux release that brought it: empty on
// Linux 5.12 and later, unless a seccomp filter moat itself runs under (a
// container's, say) answers them with ENOSYS. Each probe asks for nothing
// to be done.
func Missing() []string {
	var out []string
	// An empty attribute set changes nothing; only ENOSYS says the call is
	// not there (an ordinary user gets EPERM here, and init, with its
	// capabilities in its own user namespace, may make the call).
	if err := unix.MountSetattr(-1, "", 0, &unix.MountAttr{}); err == unix.ENOSYS {
		out = append(out, "mount_setattr (Linux 5.12)")
	}
	// No descriptor that high is open; Linux 5.9 and 5.10 have close_range
	// but refuse the CLOEXEC flag (EINVAL).
	if err := unix.CloseRange(math.MaxInt32, math.MaxInt32, unix.CLOSE_RANGE_CLOEXEC); err == unix.ENOSYS || err == unix.EPERM || err == unix.EINVAL {
		out = append(out, "close_range with CLOSE_RANGE_CLOEXEC (Linux 5.11)")
	}
	return out
}
