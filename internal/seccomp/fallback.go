package seccomp

import "sync"

// FallbackOf says what a program does instead when the system call name
// fails with ENOSYS, for the calls that libc and language runtimes are
// written to replace that way: they are newer than the kernels those
// still support, so ENOSYS ("this kernel does not have it") sends them to
// the older call. A profile that answers such a call with ENOSYS (moat's
// own do for clone3 and openat2, whose arguments a filter cannot read)
// changes nothing the command can see, so the refusal is not worth a
// person's attention. "" for any other call.
func FallbackOf(name string) string {
	return fallbacks()[name]
}

var fallbacks = sync.OnceValue(func() map[string]string {
	return map[string]string{
		"clone3":       "clone",
		"openat2":      "openat",
		"faccessat2":   "faccessat",
		"fchmodat2":    "fchmodat",
		"statx":        "fstat and fstatat",
		"epoll_pwait2": "epoll_pwait",
		"close_range":  "close, one fd at a time",
		"futex_waitv":  "futex",
		"rseq":         "running without restartable sequences",
	}
})
