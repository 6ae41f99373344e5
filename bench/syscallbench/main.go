//go:build linux

// Command syscallbench is the syscall-heavy workload of bench/syscalls.sh:
// it makes one system call N times in a tight loop and prints the time per
// call, measured around the loop only, so that process start-up (and the
// sandbox's) is not counted.
//
//	syscallbench [-n N] [-call getppid|ioctl] [-filter none|allow]
//
// prints one line: "CALL N NS_PER_OP" (NS_PER_OP with two decimals).
//
// -filter allow first installs, on the thread that runs the loop, a seccomp
// filter of one instruction that allows everything: the price of having a
// filter at all (the kernel's slower system-call entry for a filtered task),
// with no rule to evaluate. It is the floor under any profile's overhead.
//
//	syscallbench -filter allow -- CMD [ARGS...]
//
// installs that filter and executes CMD under it instead of looping (CMD
// is looked up in $PATH), for the floor of a whole command's overhead.
//
// The calls are made with syscall.RawSyscall, which skips the Go runtime's
// entersyscall/exitsyscall bookkeeping, so the loop is the kernel entry,
// the seccomp filters and the system call itself:
//
//   - getppid: the cheapest call there is; no profile looks at its
//     arguments, so the kernel's seccomp action cache (Linux >= 5.11) may
//     decide it without running the BPF programs at all.
//   - ioctl: ioctl(fd of /dev/null, TCGETS, NULL), which fails with ENOTTY
//     before the kernel looks at the (null) buffer. Every
//     profile checks ioctl's request argument (TIOCSTI, TIOCLINUX), so the
//     cache cannot decide it and every call runs the filters: the cost of
//     the BPF programs themselves.
//
// Build it static (CGO_ENABLED=0) so that it runs in a sandbox that has
// only its own directory.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// sockFilter and sockFprog are struct sock_filter and struct sock_fprog.
type sockFilter struct {
	code uint16
	_    [2]uint8 // jt, jf: unused by a lone RET
	k    uint32
}

type sockFprog struct {
	len    uint16
	filter *sockFilter
}

// allowAll is BPF_RET|BPF_K SECCOMP_RET_ALLOW; a global, so that it never moves.
var allowAll = [1]sockFilter{{code: 0x06, k: 0x7fff0000}}
var allowProg = sockFprog{len: 1, filter: &allowAll[0]}

// installAllowAll installs allowAll on the calling thread (prctl, no TSYNC):
// the caller must stay locked to its thread.
func installAllowAll() error {
	const (
		prSetNoNewPrivs   = 38
		prSetSeccomp      = 22
		seccompModeFilter = 2
	)
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", e)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetSeccomp, seccompModeFilter, uintptr(unsafe.Pointer(&allowProg))); e != 0 {
		return fmt.Errorf("prctl(PR_SET_SECCOMP): %w", e)
	}
	return nil
}

func main() {
	n := flag.Int("n", 1_000_000, "calls to make")
	call := flag.String("call", "getppid", "system call: getppid or ioctl")
	filter := flag.String("filter", "none", "none, or allow: install a one-instruction allow-all seccomp filter first")
	flag.Parse()
	// The loop and the filter of -filter allow stay on this thread.
	runtime.LockOSThread()
	switch *filter {
	case "none":
	case "allow":
		if err := installAllowAll(); err != nil {
			fmt.Fprintln(os.Stderr, "syscallbench:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "syscallbench: unknown -filter %q (none or allow)\n", *filter)
		os.Exit(2)
	}
	if args := flag.Args(); len(args) > 0 {
		path, err := exec.LookPath(args[0])
		if err == nil {
			err = syscall.Exec(path, args, os.Environ())
		}
		fmt.Fprintln(os.Stderr, "syscallbench:", err)
		os.Exit(127)
	}
	if *n < 1 {
		fmt.Fprintln(os.Stderr, "syscallbench: -n must be at least 1")
		os.Exit(2)
	}

	var trap, a1, a2 uintptr
	switch *call {
	case "getppid":
		trap = syscall.SYS_GETPPID
	case "ioctl":
		f, err := os.Open(os.DevNull)
		if err != nil {
			fmt.Fprintln(os.Stderr, "syscallbench:", err)
			os.Exit(1)
		}
		defer f.Close()
		trap, a1, a2 = syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS
	default:
		fmt.Fprintf(os.Stderr, "syscallbench: unknown -call %q (getppid or ioctl)\n", *call)
		os.Exit(2)
	}

	// One untimed call checks that the call does what is expected here:
	// a filter that refuses it would make the loop measure something else.
	_, _, e := syscall.RawSyscall(trap, a1, a2, 0)
	if want := expected(*call); e != want {
		fmt.Fprintf(os.Stderr, "syscallbench: %s returned errno %d (%v), want %d: a filter refused it?\n", *call, e, e, want)
		os.Exit(1)
	}

	start := time.Now()
	for i := 0; i < *n; i++ {
		syscall.RawSyscall(trap, a1, a2, 0)
	}
	el := time.Since(start)
	fmt.Printf("%s %d %.2f\n", *call, *n, float64(el.Nanoseconds())/float64(*n))
}

func expected(call string) syscall.Errno {
	if call == "ioctl" {
		return syscall.ENOTTY
	}
	return 0
}
