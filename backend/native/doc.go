// Package native realises a backend.Spec with Linux namespaces, the way
// bubblewrap does, in pure Go.
//
// A run starts in one of two ways. Both build the same sandbox from the
// same Spec (TestDirectStartMatchesInitStage compares them).
//
// The direct start (direct_linux.go, directplan_linux.go,
// hostdirect_linux.go), for most runs: the host turns the Spec into a
// plan, a list of system calls with their arguments already in memory,
// and clones a child into new user, mount, PID, IPC, UTS, network and
// cgroup namespaces that runs the plan with raw system calls and no Go
// runtime: it builds the root, restricts itself, forks the command (which
// execs) and stays as the sandbox's PID 1, reaping and forwarding
// signals. On amd64 the child shares the host's address space (a clone
// trampoline in assembly gives it a stack of its own), so nothing is
// copied. This is written by hand because nothing else can do it: Go
// offers no way to run code between fork and exec, and a second binary
// is not an option. It saves every run the second Go runtime the init
// stage costs (an exec of this 10 MB binary, runtime and package
// initialisation, a multi-threaded exit: about 2 ms here). The host
// serves what needs Go while the command runs: the answers to the
// observed seccomp filter's notifications, the egress proxy (on a
// listener init binds in the sandbox's network namespace and sends it),
// the wall clock, the output. When the command exits, init kills and
// reaps what is left of the run, reports, and then waits for the host to
// close the control pipe before it exits: at the end of Run, or, with
// Backend.ExitAfter (the CLI), at the host's own exit, so that init's exit
// takes the teardown of the namespaces and of the shared memory off the
// host's.
//
// The init stage (init_linux.go, mount_linux.go), for runs that need Go
// code inside the sandbox after the command: an overlay workspace under a
// disk limit, whose changes init merges when the command has ended (any
// other run under a disk limit takes the direct start, whose plan puts
// the writable places on the limit's one sized tmpfs too); and for a Spec
// whose seccomp filters would refuse the direct start's own calls. The
// host side (host_linux.go) prepares the run's cgroup, the pipes and,
// for a caller that is root, detached and id-mapped mount trees; it then
// re-executes the running binary as PID 1 of the new namespaces, sends
// it the Spec (codec.go), enforces the wall clock and output limits, and
// turns what it saw into an ExitStatus. The stage takes over the process
// from this package's init function. Go initialises a package after
// those it imports, and among the packages ready at each step the first
// by import path, so crypto/*, encoding/*, go-toml and the policy package
// are initialised in init too (about 0.5 ms of each start here goes to
// package initialisation); what comes after native (crypto/tls, x509,
// net/http, the egress proxy, the CLI) is not.
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
// Both inits apply the restrictions to themselves and then start the
// command with a plain fork (or vfork) and exec, rather than through a
// second re-executed stage: rlimits, capabilities, no_new_privs, Landlock
// and seccomp are inherited through fork, and a second Go runtime start
// would add about 1.5 ms to every run. The exception is a custom seccomp
// profile (Spec.SeccompAtExec), written for the command and not for init:
// the direct start's command process installs it as its last step before
// execve; the init stage, which runs no code of its own between fork and
// exec, installs it on itself only when it allows what init's Go code
// still needs.
//
// The init stage also serves the run while the command lives: it answers the
// notifications of its observed seccomp filter (so refused system calls
// are reported, see internal/seccomp), unless every exec is checked
// (Stdio.CheckExec): then, in either start, the filter also notifies each
// execve and execveat, and its listener goes to the host, which holds the
// rules, before the command is started (execcheck_linux.go). A session's
// init sends its listener to the host before it takes requests whether
// or not execs are checked, its filter notifying each setsid (and each
// exec only where they are checked): the host attributes each session,
// and each exec, to the command it came from (sessioncheck_linux.go), to
// end what a command detached when it is ended at a limit
// (sessionkill_linux.go). In network mode proxy it binds
// the in-sandbox listener and hands it to the host over a unix socket
// (SCM_RIGHTS), so the host's egress proxy accepts connections directly.
// Under a disk limit (disk_linux.go) it keeps /tmp, home, /dev/shm and an
// overlay's upper layer on one sized tmpfs and merges the overlay's changes
// into the change set when the command has ended.
//
// The direct start's init cannot be made non-dumpable, as the init stage
// is: that flag belongs to the address space, which it shares with moat.
// It keeps one inert capability (CAP_BLOCK_SUSPEND, checked only in the
// host's initial user namespace) in its permitted set instead, which the
// kernel's ptrace check then denies the command (whose capabilities are
// not a superset): /proc/1 stays hidden by hidepid=2, and moat's memory
// and environment out of the command's reach (TestInitMemoryIsOutOfReach).
//
// Sessions (Backend.Create, session_linux.go and session_init_linux.go):
// a sandbox that lives across commands is always started through the init
// stage, never through the direct start, whose init shares the caller's
// memory: a long-lived caller (a daemon, a library) holds other people's
// secrets. Init builds the root and restricts itself exactly as for a
// one-shot run (one executor of the setup steps), then, instead of
// running a command, serves requests on a unix socket only the host holds:
// each exec request carries the command line and, by SCM_RIGHTS, the
// process's stdin, stdout and stderr (pipes the host reads, or a pty's
// slave). Init forks each command from its one restricted thread, as the
// one-shot init does, in a session and process group of its own, and
// reports each exit; signals go to a process's group. A process's wall
// clock and output are enforced by the host, which has init kill every
// process of that command, the sessions it made included where they can
// be told (sessionkill_linux.go); the cgroup holds for the whole sandbox. Processes a command leaves in the
// background live until Destroy, which kills init and with it the PID
// namespace, then removes the cgroup; init's death (its parent-death
// signal follows the host's start thread, see onStartThread) ends the
// sandbox the same way.
//
// The one-shot Run keeps its own path rather than being Create, Exec and
// Destroy: the direct start saves each run the init stage's second Go
// runtime and a round trip on the request socket, which is what keeps
// `moat run` as fast as bubblewrap; its caller, the CLI, exits with it.
//
// Neither start does what the Spec does not say: it reads no policy and
// makes no decision about what to allow.
package native
