// Package native realises a backend.Spec with Linux namespaces, the way
// bubblewrap does, in pure Go.
//
// The host side (host_linux.go) prepares the run's cgroup, the pipes and,
// for a caller that is root, detached and id-mapped mount trees; it then
// re-executes the running binary as PID 1 of new user, mount, PID, IPC,
// UTS and cgroup namespaces, sends it the Spec (codec.go), enforces the
// wall clock and output limits, and turns what it saw into an
// ExitStatus. The stage takes over the process from this package's init
// function. Go initialises a package after those it imports, and among
// the packages ready at each step the first by import path, so crypto/*,
// encoding/*, go-toml and the policy package are initialised in init too
// (about 0.5 ms of each start here goes to package initialisation); what
// comes after native (crypto/tls, x509, net/http, the egress proxy, the
// CLI) is not.
//
// The init stage (init_linux.go, mount_linux.go) makes the network
// namespace on a thread of its own while it builds the sandbox's root
// from the Spec's ordered mount operations (with /proc mounted so that
// init is invisible to the command), enters that namespace on the thread
// that will fork the command, pivots into the root, sets rlimits,
// gives up every capability and sets no_new_privs on all of its threads,
// then forks and execs the command in a new session, and stays as reaper
// and signal forwarder. When the command exits, init exits and the kernel
// kills everything left in the PID namespace.
//
// Init applies the restrictions to itself and then starts the command with
// a plain fork and exec, rather than through a second re-executed stage:
// Go cannot run code between fork and exec, but rlimits, capabilities,
// no_new_privs (and seccomp with TSYNC) are inherited through fork, and a
// second Go runtime start would add about 1.5 ms to every run.
//
// Init also serves the run while the command lives: it answers the
// notifications of its observed seccomp filter (so refused system calls
// are reported, see internal/seccomp), and in network mode proxy it binds
// the in-sandbox listener and hands it to the host over a unix socket
// (SCM_RIGHTS), so the host's egress proxy accepts connections directly.
// Under a disk limit (disk_linux.go) it keeps /tmp, home, /dev/shm and an
// overlay's upper layer on one sized tmpfs and merges the overlay's changes
// into the change set when the command has ended.
//
// It refuses to do what the Spec does not say: it reads no policy and
// makes no decision about what to allow.
package native
