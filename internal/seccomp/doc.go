// Package seccomp compiles a system-call profile to a classic BPF program for
// seccomp(2) and installs it. It is pure Go: moat is built with CGO_ENABLED=0
// and re-executes its own binary for every sandbox start.
//
// The compiler is written here rather than taken from a library:
// libseccomp (and libseccomp-golang) needs cgo; github.com/elastic/go-seccomp-bpf
// lacks the Docker argument operators (LT, LE, GE, GT, MASKED_EQ) and a
// per-rule errno; gVisor's pkg/seccomp would pull a large dependency tree into
// the binary that every sandbox start re-executes.
//
// A [Profile] is pure data. There are three built in: [Default], a deny-list
// of the kernel surface agents' commands never need; [Strict], an allow-list
// sized for interpreters and build tools; and [Floor], the few rules moat
// stacks under any custom profile. [LoadDocker] and [ParseDocker] read the
// JSON profiles of Docker and the OCI runtime spec, evaluating their
// conditional rules for moat's command (no capabilities, the native
// architecture, the running kernel).
//
// [Compile] turns a profile into a program for one architecture (x86_64 or
// aarch64): the program first checks the audit architecture and kills the
// process for any other (and, on x86_64, for x32 system calls), then finds
// the rules of the system call by a binary search over the system-call
// numbers, so that a call without rules reaches the default action in a few
// instructions. The programs of the three built-in profiles are generated
// at build time (zprograms.go, checked by TestPrograms), and Compile
// returns the stored one when the profile it is given hashes to a built-in
// one: compiling cold costs each run about 0.2 ms. [Summarize] describes a
// profile for people, running its
// program through a classic-BPF interpreter to find what it allows that the
// floor refuses.
//
// Nothing in this package makes a system call except the installers
// ([Install], [InstallObserved], [InstallObservedNotify]), a [Supervisor]
// answering a listener's notifications (which, for an exec it is asked
// about, reads the caller's path and argv with process_vm_readv, and,
// for one it lets go on, attaches to the caller with ptrace until the
// new image's argv is checked against what was read, and, for a listen,
// takes the caller's socket with pidfd_getfd and listens on it itself), and
// uname(2) for the kernel version that Docker profiles' minKernel
// conditions compare.
package seccomp

//go:generate go run gen_sysnum.go
