package seccomp

import (
	"fmt"
	"strings"
)

// startCalls are the system calls without which no program starts under a
// filter. They were found by refusing (EPERM) each call that a statically
// and a dynamically linked C program (glibc) make, one at a time, and
// keeping those whose refusal stopped either from running to its exit:
// execve, mprotect and, on x86_64, arch_prctl for both; mmap, openat,
// read, close, newfstatat and pread64 for the dynamic loader. libc does
// without the others (brk, munmap, access, readlink, set_tid_address,
// set_robust_list, rseq, prlimit64, getrandom). exit_group is kept too:
// libc falls back to exit when it is refused, but moat's own command
// process, when every execve has failed, has only exit_group to end with.
// A custom profile that refuses one of these would make every run fail, so
// it is refused up front.
func startCalls(arch string) []string {
	calls := []string{"execve", "exit_group", "mprotect", "mmap", "openat", "read", "close", "newfstatat", "pread64"}
	if arch == ArchX86_64 {
		calls = append(calls, "arch_prctl")
	}
	return calls
}

// argPatterns are the arguments a start call is evaluated with: a rule may
// compare them, and the loader's own are not known here.
var argPatterns = [][6]uint64{
	{},
	{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)},
	{1, 1, 1, 1, 1, 1},
	{0, 0, 7, 0x22, ^uint64(0), 0}, // mmap(NULL, 0, RWX, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0)
	{0, 0, 5, 0x802, 3, 0},         // mmap(NULL, 0, R|X, MAP_PRIVATE|MAP_DENYWRITE, 3, 0)
	{0, 0, 1},                      // mprotect(..., PROT_READ)
	{^uint64(99), 0, 0x80000},      // openat(AT_FDCWD, ..., O_RDONLY|O_CLOEXEC)
}

// StartRefusals lists the calls of the start set that p refuses: execve
// and exit_group whatever their arguments (moat's command calls them
// under the filter, and waits on a refused call it cannot report), the
// others for every argument pattern tried. An empty list means a program
// can start under p as far as a filter can tell.
func StartRefusals(p *Profile, arch string) ([]string, error) {
	prog, err := Compile(p, arch)
	if err != nil {
		return nil, err
	}
	var refused []string
	for _, name := range startCalls(arch) {
		nr, ok := Lookup(arch, name)
		if !ok {
			continue
		}
		strict := name == "execve" || name == "exit_group"
		allowed, all := false, true
		for _, args := range argPatterns {
			ret, err := Evaluate(prog, int32(nr), AuditArch(arch), 0, args)
			ok := err == nil && Allows(ret)
			allowed = allowed || ok
			all = all && ok
		}
		if !allowed || strict && !all {
			refused = append(refused, name)
		}
	}
	return refused, nil
}

// StartError says why no program can start under a profile that refuses
// the start calls listed.
func StartError(refused []string) error {
	return fmt.Errorf("no program can start under this profile: it refuses %s, which every program needs to be loaded and to exit (allow them with SCMP_ACT_ALLOW)", strings.Join(refused, ", "))
}
