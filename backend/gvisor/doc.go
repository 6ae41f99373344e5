// Package gvisor realises a backend.Spec with gVisor's runsc: the command
// runs on a kernel written in Go (the sentry) rather than on the host's, so
// a bug in the host kernel's system calls is no longer one step from an
// escape. It is moat's stronger tier (`--isolation gvisor`), under the
// same policy as the native backend.
//
// It owns the translation of a Spec into an OCI bundle (config.json, the
// contents of MountFile operations and the symlinks of the root in the
// bundle directory), runsc's invocation, the run's wall and output limits,
// the host side of an overlay workspace and of the memory and CPU limits,
// and the removal of everything runsc and the bundle leave. It owns no
// policy: what it cannot enforce it refuses, by name, before anything
// starts (Backend.Unsupported), and the sandbox package turns that into the
// refusal the user reads.
//
// One-shot runs (Run) are one `runsc run` of the command. Sessions
// (Create, backend.Lifecycle) are one `runsc run` of a container whose
// first process is moat's own binary, bound in read-only, holding it open
// as a user of its own (hold_linux.go: the commands cannot signal or read
// it); each command is a `runsc exec` into it, with its own process spec
// (argv, environment, directory, the sandbox user, no capabilities,
// no_new_privs, a pty from the host when asked) and the container's
// seccomp filter and rlimits, which the sentry gives every process.
// Both are built by one function (prepare) and die with moat: runsc runs
// attached, with a parent-death signal.
//
// Network mode proxy: runsc's network is none (loopback only), and moat's
// own binary, bound in, listens on 127.0.0.1:ProxyPort and relays to
// moat's proxy through a unix socket bound in from the host: as the
// container's first process, which then runs the command, in a one-shot
// run (forward_linux.go); as the session's holder in a session.
//
// An overlay workspace is mounted by moat on the host (the native
// backend's layers and options) and its merged view bound in
// (overlay_linux.go). Memory and CPU limits are those of a cgroup moat
// makes (internal/cgroup) and starts runsc inside (cgroup_linux.go): they
// bound the sentry and the gofer, which do all of the sandbox's work, and
// an OOM kill ends the whole sandbox.
//
// What it refuses: a caller that is not root (rootless runsc has no
// network isolation of its own), a process limit (a host cgroup would
// count the sentry's threads, not the sandbox's processes), a disk limit
// (the sandbox's tmpfs is the sentry's memory), TCP port rules
// (Landlock's; gVisor has no Landlock), a writable workspace the sandbox
// user does not own (runsc has no id-mapped mounts), a sandbox uid or gid
// of a host system account (runsc maps no ids: the command has its ids'
// rights over every file bound in, not user.host_uid's), and a stack of
// several seccomp filters or one a runsc filter cannot express. What
// gVisor does differently where it runs: the seccomp profile is applied
// by the sentry to the command's system calls (a refused call gets EPERM,
// or ENOSYS where the profile says so; a call the profile kills on kills
// the calling thread), the denials are not observed, /proc is the
// sentry's own, and Landlock does not apply (the mounts decide what
// exists; a denied path in the sentry's own /proc, /sys or /dev is
// masked there as any other).
//
// Finding runsc (Find): [sandbox] runsc in the policy, $MOAT_RUNSC, the
// cache scripts/runsc.sh builds into, then PATH; a named one must be
// root's or this user's, in directories only they can change. A runsc a
// trust check hashed (a workspace policy's, Backend.Checked) is never
// run from where it lies, which a command may write: a copy of the bytes
// hashed runs instead, kept by digest in moat's state directory, which
// no sandbox may write.
package gvisor
