package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoNewPrivs is returned by Install when no_new_privs is not set.
var ErrNoNewPrivs = errors.New("seccomp: no_new_privs is not set on the calling thread; set it first (prctl PR_SET_NO_NEW_PRIVS)")

// Install loads prog as a seccomp filter for every thread of the process
// (SECCOMP_FILTER_FLAG_TSYNC), so it holds in a multithreaded Go program and
// in every process it starts afterwards. Filters stack: an installed filter
// cannot be removed, and a later one only restricts further.
//
// The calling thread must have set no_new_privs beforehand (TSYNC then
// sets it on every other thread too); Install refuses otherwise, even
// where the kernel would accept the filter because of CAP_SYS_ADMIN.
func Install(prog []Instruction) error {
	if err := checkInstall(prog); err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch {
	case errno == unix.EINVAL:
		return fmt.Errorf("seccomp: install filter: %w (kernel without seccomp filters or TSYNC, or an invalid program)", errno)
	case errno != 0:
		return fmt.Errorf("seccomp: install filter: %w", errno)
	case r != 0:
		// With TSYNC, a positive result is the id of a thread that could
		// not be synchronised (it runs a filter not shared by the caller).
		return fmt.Errorf("seccomp: install filter: thread %d cannot be synchronised", r)
	}
	return nil
}

func checkInstall(prog []Instruction) error {
	if len(prog) == 0 || len(prog) > maxInstructions {
		return fmt.Errorf("seccomp: program of %d instructions (want 1 to %d)", len(prog), maxInstructions)
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("seccomp: read no_new_privs: %w", err)
	}
	if nnp != 1 {
		return ErrNoNewPrivs
	}
	return nil
}
