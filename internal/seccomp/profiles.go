package seccomp

import "slices"

// Constants of the Linux ABI used by the built-in profiles. They are the
// same on x86_64 and aarch64, and written out so that the profiles build
// (and can be inspected) on any platform.
const (
	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16
	afPacket  = 17
	afVsock   = 40

	sockRaw      = 3
	sockTypeMask = 0xf // SOCK_NONBLOCK and SOCK_CLOEXEC sit above it

	netlinkRoute = 0
	ipprotoMPTCP = 262

	sISUID = 0o4000
	sISGID = 0o2000
	sIFREG = 0o100000
	oCreat = 0o100

	tiocsti   = 0x5412
	tioclinux = 0x541c

	cloneNewTime   = 0x00000080
	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000

	perLinux   = 0x0000
	perLinux32 = 0x0008
	uname26    = 0x0020000
	perQuery   = 0xffffffff

	enosys = 38
)

// int32Is matches an argument the kernel reads as a 32-bit int or unsigned
// int: only the low half of the register counts, so only it is compared.
func int32Is(index uint, v uint32) Arg {
	return Arg{Index: index, Op: MaskedEQ, Value: 0xffffffff, ValueTwo: uint64(v)}
}

// sockType matches a socket type argument (argument 1 of socket) whose low
// bits, below SOCK_NONBLOCK and SOCK_CLOEXEC, are t.
func sockType(t uint64) Arg {
	return Arg{Index: 1, Op: MaskedEQ, Value: sockTypeMask, ValueTwo: t}
}

// hasBits matches an argument with all of bits set.
func hasBits(index uint, bits uint64) Arg {
	return Arg{Index: index, Op: MaskedEQ, Value: bits, ValueTwo: bits}
}

func deny(comment string, names ...string) Rule {
	return Rule{Names: names, Action: Errno, Errno: eperm, Comment: comment}
}

func denyIf(comment, name string, args ...Arg) Rule {
	return Rule{Names: []string{name}, Action: Errno, Errno: eperm, Args: args, Comment: comment}
}

func allowIf(comment, name string, args ...Arg) Rule {
	return Rule{Names: []string{name}, Action: Allow, Args: args, Comment: comment}
}

// namespaceRules refuse new namespaces: a user namespace gives back every
// capability, and the others reshape the sandbox from inside.
func namespaceRules() []Rule {
	rules := []Rule{
		deny("new namespaces: a user namespace regains capabilities inside the sandbox", "unshare"),
		deny("joining namespaces: could reach namespaces outside the sandbox", "setns"),
		{Names: []string{"clone3"}, Action: Errno, Errno: enosys,
			Comment: "flags are in memory and cannot be checked: ENOSYS makes libc fall back to clone"},
	}
	// On clone, flags are argument 0 on both architectures; the kernel
	// uses its low 32 bits only, where all the namespace flags are.
	// clone(2) reads CLONE_NEWTIME as part of the exit signal, where it is
	// never valid; refusing it costs nothing.
	for _, f := range slices.Concat(namespaceFlags, []cloneFlag{{cloneNewTime, "CLONE_NEWTIME"}}) {
		rules = append(rules, denyIf("clone into a new namespace ("+f.name+")", "clone", hasBits(0, f.flag)))
	}
	return rules
}

// fallocate's mode bits (linux/falloc.h).
const (
	fallocKeepSize    = 0x01
	fallocPunchHole   = 0x02
	fallocInsertRange = 0x20
)

// WithFileSizeLimit returns p with fallocate's FALLOC_FL_KEEP_SIZE
// refused first (EPERM: runsc answers no other errno), a hole punched
// excepted: a file-size limit (RLIMIT_FSIZE) bounds how far
// a file's size goes, and blocks reserved past its end leave the size
// where it was, so one file would hold any amount of a host filesystem's
// disk under the limit (found by a tester). FALLOC_FL_INSERT_RANGE is
// refused too: it grows a file by the range it inserts, and filesystems
// do not hold that growth to the limit (a tester's 8 KiB file became
// 1 TiB). p is not changed.
func WithFileSizeLimit(p *Profile) *Profile {
	q := *p
	q.Rules = append([]Rule{{
		Names: []string{"fallocate"}, Action: Errno, Errno: eperm,
		// One condition (runsc reads two on one argument as either):
		// the mode's two low bits are KEEP_SIZE alone.
		Args:    []Arg{{Index: 1, Op: MaskedEQ, Value: fallocKeepSize | fallocPunchHole, ValueTwo: fallocKeepSize}},
		Comment: "blocks reserved past a file's end escape its file-size limit",
	}, {
		Names: []string{"fallocate"}, Action: Errno, Errno: eperm,
		Args:    []Arg{{Index: 1, Op: MaskedEQ, Value: fallocInsertRange, ValueTwo: fallocInsertRange}},
		Comment: "a range inserted into a file grows it past its file-size limit",
	}}, p.Rules...)
	return &q
}

// ttyRules refuse the ioctls that push input into a terminal, which can run
// commands in the user's shell once the sandbox exits. The command is an
// unsigned int: only the low half is compared.
func ttyRules() []Rule {
	return []Rule{
		denyIf("TIOCSTI fakes terminal input that the user's shell would run", "ioctl", int32Is(1, tiocsti)),
		denyIf("TIOCLINUX can paste the console selection as input", "ioctl", int32Is(1, tioclinux)),
	}
}

// mptcpRules refuse MPTCP sockets, which Landlock's TCP rules do not see.
func mptcpRules() []Rule {
	return []Rule{
		denyIf("MPTCP over IPv4 escapes Landlock's TCP rules", "socket", int32Is(0, afInet), int32Is(2, ipprotoMPTCP)),
		denyIf("MPTCP over IPv6 escapes Landlock's TCP rules", "socket", int32Is(0, afInet6), int32Is(2, ipprotoMPTCP)),
	}
}

// Floor returns the small profile moat stacks under any custom profile:
// no new namespaces, no terminal input injection, no MPTCP, no ptrace, no
// set-id files, no io_uring and no kernel keyrings. Its default action is Allow. Each call
// returns a new Profile.
//
// The floor holds what protects the host and the caller from the command,
// which a custom profile, written for what runs inside, has no reason to
// care about: a set-id file is harmless in the sandbox (its mounts are
// nosuid) and a privilege on the host once the run is over. io_uring is
// here because its requests are not system calls: an IORING_OP_OPENAT
// with a set-id mode, or an MPTCP IORING_OP_SOCKET, would pass every rule
// of the floor.
func Floor() *Profile {
	rules := namespaceRules()
	rules = append(rules, ttyRules()...)
	rules = append(rules, mptcpRules()...)
	rules = append(rules, deny("tracing reads and rewrites other processes; the sandbox's init must stay out of reach", "ptrace"))
	rules = append(rules, setidRules()...)
	rules = append(rules, deny("io_uring bypasses this filter and has a history of bugs", "io_uring_setup", "io_uring_enter", "io_uring_register"))
	rules = append(rules, keyringRule())
	return &Profile{DefaultAction: Allow, Rules: rules}
}

// keyringRule refuses the kernel's keyrings. They are not namespaced: the
// command is started in its caller's session keyring (moat does not make
// one per run, since every keyring counts against its owner's key quota,
// which the sandboxes of a host uid share), and possessing it would let
// the command read, replace and add to the keys its caller keeps there
// (Kerberos tickets, a login's secrets).
func keyringRule() Rule {
	return deny("kernel keyrings are not namespaced: the caller's session keyring holds the host's keys", "keyctl", "add_key", "request_key")
}

// FloorNames reports whether the floor has a rule for the system call
// name (for some of its arguments, or all): no custom profile lets such
// a call through where the floor refuses it.
func FloorNames(name string) bool {
	for _, r := range Floor().Rules {
		for _, n := range r.Names {
			if n == name {
				return true
			}
		}
	}
	return false
}

// Default returns moat's default profile: a deny-list, returning EPERM (so
// programs fail gracefully), of the kernel surface an agent's commands never
// need. Its default action is Allow. Each call returns a new Profile.
func Default() *Profile {
	rules := []Rule{
		// Filesystem layout: the mounts decide what exists in the sandbox.
		deny("mounting changes what exists in the sandbox", "mount", "umount2", "pivot_root", "chroot"),
		deny("the new mount API mounts too", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "open_tree_attr"),
	}
	rules = append(rules, namespaceRules()...)
	rules = append(rules,
		// Other processes and the kernel itself.
		deny("tracing reads and rewrites other processes; the sandbox's init must stay out of reach", "ptrace"),
		deny("reads and writes another process's memory", "process_vm_readv", "process_vm_writev"),
		deny("compares kernel objects of other processes, an information leak", "kcmp"),
		deny("eBPF is a large kernel attack surface", "bpf"),
		deny("performance counters leak kernel addresses and have a history of bugs", "perf_event_open"),
		deny("userfaultfd stretches kernel race windows for exploits", "userfaultfd"),
		deny("io_uring bypasses this filter and has a history of bugs", "io_uring_setup", "io_uring_enter", "io_uring_register"),
		keyringRule(),
		deny("loading a kernel", "kexec_load", "kexec_file_load"),
		deny("loading kernel modules", "init_module", "finit_module", "delete_module"),
		deny("file handles open files by inode, around the mount layout", "open_by_handle_at", "name_to_handle_at"),
		// personality: the Linux default, the 32-bit and uname-26 variants
		// that Docker also allows, and the query; not ADDR_NO_RANDOMIZE or
		// READ_IMPLIES_EXEC, which weaken exploit mitigations. The argument
		// is an unsigned int.
		allowIf("the default personality", "personality", int32Is(0, perLinux)),
		allowIf("the 32-bit personality", "personality", int32Is(0, perLinux32)),
		allowIf("uname reports a 2.6 kernel, for old software", "personality", int32Is(0, uname26)),
		allowIf("32-bit and uname-26 together", "personality", int32Is(0, perLinux32|uname26)),
		allowIf("querying the personality", "personality", int32Is(0, perQuery)),
		deny("other personalities disable address-space randomisation and similar mitigations", "personality"),
		// Host administration.
		deny("process accounting is host-wide", "acct"),
		deny("swap is host-wide", "swapon", "swapoff"),
		deny("restarts or halts the host", "reboot"),
		deny("the kernel log leaks kernel addresses", "syslog"),
		// adjtimex and clock_adjtime take a struct whose modes field says
		// whether they only read; a filter cannot see it, so both are
		// refused, reads included.
		deny("the clock is host-wide", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex"),
		deny("disk quotas are host-wide", "quotactl", "quotactl_fd"),
		deny("raw I/O port access", "iopl", "ioperm"),
		deny("profiling interface, an information leak", "lookup_dcookie"),
		deny("hangs up the controlling terminal of other processes", "vhangup"),
	)
	rules = append(rules, socketRules()...)
	rules = append(rules, mptcpRules()...)
	rules = append(rules, setidRules()...)
	rules = append(rules, ttyRules()...)
	return &Profile{DefaultAction: Allow, Rules: rules}
}

// socketRules refuse the socket families and types a command does not need.
// Family and protocol are ints: only the low halves are compared.
func socketRules() []Rule {
	return []Rule{
		denyIf("packet sockets see and forge raw link-layer traffic", "socket", int32Is(0, afPacket)),
		denyIf("vsock reaches the hypervisor and other VMs", "socket", int32Is(0, afVsock)),
		// A protocol whose low half is NETLINK_ROUTE but whose high half is
		// not is refused too: NE compares all 64 bits, which errs on the
		// side of refusal.
		denyIf("netlink other than NETLINK_ROUTE (audit, uevents, netfilter, ...)", "socket",
			int32Is(0, afNetlink), Arg{Index: 2, Op: NE, Value: netlinkRoute}),
		denyIf("raw IPv4 sockets forge packets", "socket", int32Is(0, afInet), sockType(sockRaw)),
		denyIf("raw IPv6 sockets forge packets", "socket", int32Is(0, afInet6), sockType(sockRaw)),
	}
}

// setidRules refuse the setuid and setgid bits in every mode a system call
// takes, so that no set-id file is made in the sandbox. The sandbox's own
// mounts are nosuid, so the bits give nothing inside; they matter on the
// host, where a file the command wrote in the workspace (owned by the
// workspace's owner: root, when root runs moat) would run with its owner's
// or group's rights for whoever executes it, and where a later cp as root
// onto the same path keeps the bits.
//
// The modes are checked wherever a file gets one: the chmod calls; open,
// openat and creat (the mode counts only with O_CREAT or O_TMPFILE, and
// the bits are refused whatever the flags: a program that passes them is
// asking for them); mknod and mknodat (an ordinary user may make regular
// files and FIFOs with them). The kernel reads a mode as a 16-bit
// umode_t, so only the two bits are compared, never the rest of the
// register. openat2 carries its mode in a struct in memory, out of a
// filter's reach: it gets ENOSYS, on which libc and Go fall back to
// openat.
//
// mkdir and mkdirat are left alone: the kernel keeps only the permission
// and sticky bits of their mode, so they never make a set-id directory,
// and cp -r passes a setgid source directory's mode to mkdir, which a
// refusal would break. A directory still comes out setgid when its parent
// is: that is the kernel carrying the parent's group down, chosen by
// whoever made the parent, and it gives no one any rights (a setgid
// directory runs nothing).
//
// Other routes are closed by the sandbox's layout, not here: a hard link
// to a set-id file elsewhere fails with EXDEV, since the workspace is a
// mount of its own (and protected_hardlinks refuses links to files the
// command does not own); rename from /tmp, a tmpfs, fails with EXDEV too;
// an overlay or copy workspace's changes are applied with the permission
// bits only; io_uring, whose requests no filter sees, is refused.
func setidRules() []Rule {
	var rules []Rule
	for _, s := range []struct {
		name string
		mode uint
	}{
		{"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2},
		{"open", 2}, {"openat", 3}, {"creat", 1}, {"mknod", 1}, {"mknodat", 2},
	} {
		const why = "set-id mode: a setuid or setgid file runs with its owner's or group's rights outside the sandbox"
		rules = append(rules, denyIf(why, s.name, hasBits(s.mode, sISUID)), denyIf(why, s.name, hasBits(s.mode, sISGID)))
	}
	return append(rules, Rule{Names: []string{"openat2"}, Action: Errno, Errno: enosys,
		Comment: "the mode is in memory and cannot be checked for set-id bits: ENOSYS makes libc fall back to openat"})
}

// cloneFlag is a namespace flag of clone(2) and its name.
type cloneFlag struct {
	flag uint64
	name string
}

// namespaceFlags are the clone flags that make a new namespace, which the
// floor refuses and its probes try.
var namespaceFlags = []cloneFlag{
	{cloneNewNS, "CLONE_NEWNS"}, {cloneNewUTS, "CLONE_NEWUTS"}, {cloneNewIPC, "CLONE_NEWIPC"},
	{cloneNewUser, "CLONE_NEWUSER"}, {cloneNewPID, "CLONE_NEWPID"}, {cloneNewNet, "CLONE_NEWNET"},
	{cloneNewCgroup, "CLONE_NEWCGROUP"},
}
