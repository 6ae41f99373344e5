package seccomp

// Strict returns moat's allow-list profile: every system call not listed
// fails with EPERM. The list is sized for interpreters and build tools
// (python3, node, git, gcc, go, make, bash, coreutils, curl, pip), and is
// Docker's default allow-list less what Default refuses and less calls
// those tools do not make. It keeps Default's argument rules and holds
// every rule of Floor itself, so it needs no floor stacked under it. It
// also allows what moat's init does after installing it: fork (clone
// without namespace flags), execve, wait4, kill, write and the Go runtime's
// calls. Each call returns a new Profile.
func Strict() *Profile {
	// Refusals first: for a call with argument rules, the first matching
	// rule decides, and a later allow must not shadow them.
	rules := namespaceRules()
	rules = append(rules, ttyRules()...)
	rules = append(rules, mptcpRules()...)
	rules = append(rules, deny("tracing reads and rewrites other processes; the sandbox's init must stay out of reach", "ptrace"))
	rules = append(rules, socketRules()...)
	rules = append(rules, setidRules()...)
	rules = append(rules,
		allowIf("fork and threads: clone without namespace flags (refused above)", "clone"),
		allowIf("terminal and device control, less TIOCSTI and TIOCLINUX (refused above)", "ioctl"),
		allowIf("modes without the set-id bits (refused above)", "chmod"),
		allowIf("modes without the set-id bits (refused above)", "fchmod"),
		allowIf("modes without the set-id bits (refused above)", "fchmodat"),
		allowIf("modes without the set-id bits (refused above)", "fchmodat2"),
		allowIf("local sockets", "socket", int32Is(0, afUnix)),
		allowIf("IPv4 sockets, less raw and MPTCP ones (refused above)", "socket", int32Is(0, afInet)),
		allowIf("IPv6 sockets, less raw and MPTCP ones (refused above)", "socket", int32Is(0, afInet6)),
		allowIf("netlink, NETLINK_ROUTE only (others refused above): getaddrinfo and ip addr", "socket", int32Is(0, afNetlink)),
		allowIf("the default personality", "personality", int32Is(0, perLinux)),
		allowIf("the 32-bit personality", "personality", int32Is(0, perLinux32)),
		allowIf("uname reports a 2.6 kernel, for old software", "personality", int32Is(0, uname26)),
		allowIf("32-bit and uname-26 together", "personality", int32Is(0, perLinux32|uname26)),
		allowIf("querying the personality", "personality", int32Is(0, perQuery)),
	)
	for _, g := range strictAllow {
		rules = append(rules, Rule{Names: g.names, Action: Allow, Comment: g.comment})
	}
	return &Profile{DefaultAction: Errno, DefaultErrno: eperm, Rules: rules}
}

// strictAllow are the calls Strict allows whatever their arguments, by
// purpose. Names of only one architecture (open on x86_64) are skipped on
// the other.
var strictAllow = []struct {
	comment string
	names   []string
}{
	{"files: open, read, write, seek, sync (set-id modes are refused above, openat2 gets ENOSYS)", []string{
		"open", "openat", "creat", "close", "close_range", "read", "readv", "pread64", "preadv", "preadv2",
		"write", "writev", "pwrite64", "pwritev", "pwritev2", "lseek", "sendfile", "copy_file_range", "splice",
		"tee", "readahead", "fadvise64", "fallocate", "truncate", "ftruncate", "fsync", "fdatasync", "sync",
		"syncfs", "sync_file_range", "flock", "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2", "memfd_create",
		"cachestat"}},
	{"file metadata and names (set-id modes are refused above)", []string{
		"stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat",
		"faccessat2", "readlink", "readlinkat", "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir",
		"mkdirat", "rmdir", "rename", "renameat", "renameat2", "link", "linkat", "unlink", "unlinkat",
		"symlink", "symlinkat", "mknod", "mknodat", "umask", "chown", "fchown", "fchownat", "lchown", "utime",
		"utimes", "utimensat", "futimesat", "statmount", "listmount"}},
	{"extended attributes", []string{"getxattr", "lgetxattr", "fgetxattr", "getxattrat", "setxattr", "lsetxattr",
		"fsetxattr", "setxattrat", "listxattr", "llistxattr", "flistxattr", "listxattrat", "removexattr",
		"lremovexattr", "fremovexattr", "removexattrat"}},
	{"waiting on many files and events", []string{"poll", "ppoll", "select", "pselect6", "epoll_create",
		"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2",
		"signalfd", "signalfd4", "timerfd_create", "timerfd_settime", "timerfd_gettime", "inotify_init",
		"inotify_init1", "inotify_add_watch", "inotify_rm_watch"}},
	{"asynchronous I/O (libaio; io_uring stays refused)", []string{"io_setup", "io_destroy", "io_submit",
		"io_cancel", "io_getevents", "io_pgetevents"}},
	{"memory", []string{"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "mlock",
		"mlock2", "munlock", "mlockall", "munlockall", "membarrier", "mseal", "map_shadow_stack", "pkey_alloc",
		"pkey_free", "pkey_mprotect"}},
	{"processes: exec, exit, wait; fork is clone, checked above", []string{"execve", "execveat", "fork", "vfork",
		"exit", "exit_group", "wait4", "waitid", "set_tid_address", "set_robust_list", "get_robust_list",
		"rseq", "arch_prctl", "prctl", "uretprobe", "restart_syscall", "pidfd_open", "pidfd_send_signal",
		"seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"}},
	{"signals", []string{"kill", "tkill", "tgkill", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn",
		"rt_sigpending", "rt_sigsuspend", "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
		"sigaltstack", "pause", "alarm", "getitimer", "setitimer"}},
	{"threads and scheduling", []string{"futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
		"sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_setparam",
		"sched_getscheduler", "sched_setscheduler", "sched_getattr", "sched_setattr",
		"sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval", "getpriority",
		"setpriority", "ioprio_get", "ioprio_set", "getcpu"}},
	{"time", []string{"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
		"times", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete"}},
	{"identity and limits (without capabilities a process can only switch among its own ids)", []string{
		"getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
		"getgroups", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid",
		"setfsgid", "setgroups", "capget", "capset", "getpgid", "getpgrp", "setpgid", "getsid", "setsid",
		"getrlimit", "setrlimit", "prlimit64", "getrusage", "uname", "sysinfo", "getrandom"}},
	{"sockets (socket itself is checked above)", []string{"socketpair", "bind", "listen", "accept", "accept4",
		"connect", "getsockname", "getpeername", "getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg",
		"recvmsg", "sendmmsg", "recvmmsg", "shutdown"}},
	{"System V semaphores and shared memory, in the sandbox's own IPC namespace", []string{"semget", "semop",
		"semtimedop", "semctl", "shmget", "shmat", "shmdt", "shmctl"}},
}
