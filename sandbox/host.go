package sandbox

import (
	"fmt"

	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/internal/cgroup"
	"github.com/moatbox/moat/internal/hostinfo"
	"github.com/moatbox/moat/internal/inputfile"
	"github.com/moatbox/moat/internal/rt0"
	"github.com/moatbox/moat/internal/seccomp"
	"github.com/moatbox/moat/policy"
)

// Host is what this host offers moat for this caller, as [ProbeHost]
// found it: the facts `moat doctor` prints. It says what is there; which
// policy can run is decided when one does.
type Host struct {
	// Kernel is the kernel's release.
	Kernel string
	// MissingSyscalls are system calls every sandbox needs that this
	// kernel refuses; NeedKernel says what to do about them.
	MissingSyscalls []string
	NeedKernel      string
	// UserNamespaces says whether this caller can make user namespaces,
	// and UserNamespacesDetail why or why not.
	UserNamespaces       bool
	UserNamespacesDetail string
	// LandlockABI is the kernel's Landlock ABI, 0 without Landlock;
	// LandlockUsable the ABI moat enforces its rules with, 0 when the
	// kernel's cannot handle the rights moat grants on writable paths.
	LandlockABI    int
	LandlockUsable int
	// Seccomp says whether seccomp-bpf filters can be installed.
	Seccomp bool
	// Cgroups is what this caller can do with cgroups.
	Cgroups HostCgroups
	// NprocPerUserns says whether the kernel counts RLIMIT_NPROC per user
	// namespace (Linux 5.14), so that limits.pids holds without a cgroup.
	NprocPerUserns bool
	// FastStart says whether the binary was linked with moat's entry
	// point (-ldflags=-E=_rt0_moat).
	FastStart bool
}

// HostCgroups is the cgroup part of [Host].
type HostCgroups struct {
	// Layout is "v1", "v2", "hybrid" or "none".
	Layout string
	// Usable says, for "memory", "pids" and "cpu", whether this caller's
	// runs can have that limit; Why says why not for those that cannot.
	Usable map[string]bool
	Why    map[string]string
	// HowTo says how this caller could get the limits it lacks (commands
	// with this host's paths); "" when it lacks none.
	HowTo string
}

// ProbeHost reads what this host offers moat. It creates nothing and
// runs no sandbox.
func ProbeHost() *Host {
	us := hostinfo.UserNamespaces()
	cg := cgroup.Probe()
	return &Host{
		Kernel:          hostinfo.Kernel(),
		MissingSyscalls: hostinfo.Missing(),
		NeedKernel:      hostinfo.NeedKernel,
		UserNamespaces:  us.Usable, UserNamespacesDetail: us.Detail,
		LandlockABI:    hostinfo.LandlockABI(),
		LandlockUsable: native.UsableLandlockABI(),
		Seccomp:        hostinfo.Seccomp(),
		Cgroups:        HostCgroups{Layout: cg.Version, Usable: cg.Usable, Why: cg.Why, HowTo: cg.HowTo},
		NprocPerUserns: native.NprocPerUserns(),
		FastStart:      rt0.Linked(),
	}
}

// SeccompNativeArch is this host's architecture as seccomp names it, or
// "" when moat compiles no filters for it.
func SeccompNativeArch() string { return seccomp.NativeArch() }

// SeccompCheck is what [CheckSeccompProfile] found about a profile.
type SeccompCheck struct {
	// Builtin is set for moat's own profiles, default and strict.
	Builtin bool
	// Arch is the architecture summarised; FileArches the SCMP_ARCH_*
	// names a file lists for it.
	Arch       string
	FileArches []string
	// Default is the decision for a system call no rule names ("allow",
	// "errno EPERM", ...).
	Default string
	// The architecture's system calls, counted by the decision they get
	// when none of their argument rules matches: Denied by errno name,
	// Killed (the thread or the process), Other (trapped or logged).
	Total, Allowed, Killed, Other int
	Denied                        map[string]int
	// Conditional has a line per system call with argument rules.
	Conditional []string
	// FloorGaps lists what moat's floor refuses and the profile allows.
	// Under a file's profile the floor stays in force as a second filter;
	// in a built-in profile a gap is a bug.
	FloorGaps []string
	// DefaultGaps lists what moat's default profile refuses, beyond the
	// floor, and the profile allows: a command may do it under the
	// profile.
	DefaultGaps []string
	// Dropped are a file's rules left out because their conditions do not
	// hold in moat's sandbox (no capabilities, the architecture, Kernel);
	// Skipped the names of system calls the architecture does not have.
	Dropped []string
	Skipped []string
	Kernel  string
}

// CheckSeccompProfile reads and validates a seccomp profile as a run
// would (name is "default", "strict" or a Docker-format file) and
// summarises it for arch. A file no program could start under is refused,
// as a run refuses it. Errors name the file; a file's every problem is
// in one error, a line each.
func CheckSeccompProfile(name, arch string) (*SeccompCheck, error) {
	if arch != seccomp.ArchX86_64 && arch != seccomp.ArchAarch64 {
		return nil, fmt.Errorf("seccomp filters are compiled for x86_64 and aarch64, not %q", arch)
	}
	c := &SeccompCheck{Arch: arch}
	var p *seccomp.Profile
	switch name {
	case policy.ProfileDefault:
		p, c.Builtin = seccomp.Default(), true
	case policy.ProfileStrict:
		p, c.Builtin = seccomp.Strict(), true
	default:
		data, err := inputfile.Read(name, "seccomp profile", inputfile.MaxProfile)
		if err != nil {
			return nil, err
		}
		t := seccomp.HostTarget()
		t.Arch = arch
		doc, err := seccomp.ParseDocker(name, data, t)
		if err != nil {
			return nil, err
		}
		p = doc.Profile
		c.FileArches, c.Dropped, c.Skipped, c.Kernel = doc.Arches, doc.Dropped, doc.Skipped, t.Kernel.String()
		// A run refuses such a profile too (seccompProfiles).
		refused, err := seccomp.StartRefusals(p, arch)
		if err == nil && len(refused) > 0 {
			err = seccomp.StartError(refused)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	s, err := seccomp.Summarize(p, arch)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c.Default, c.Total, c.Allowed, c.Killed, c.Other = s.Default, s.Total, s.Allowed, s.Killed, s.Other
	c.Denied, c.Conditional, c.FloorGaps, c.DefaultGaps = s.Denied, s.Conditional, s.FloorGaps, s.DefaultGaps
	return c, nil
}
