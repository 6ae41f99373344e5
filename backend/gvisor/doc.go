// Package gvisor realises a backend.Spec with gVisor's runsc: the command
// runs on a kernel written in Go (the sentry) rather than on the host's, so
// a bug in the host kernel's system calls is no longer one step from an
// escape. It is moat's stronger tier (`--isolation gvisor`), under the
// same policy as the native backend.
//
// It owns the translation of a Spec into an OCI bundle (config.json, the
// contents of MountFile operations and the symlinks of the root in the
// bundle directory), runsc's invocation, the run's wall and output limits,
// and the removal of everything runsc and the bundle leave. It owns no
// policy: what it cannot enforce it refuses, by name, before anything
// starts (Backend.Unsupported), and the sandbox package turns that into the
// refusal the user reads.
//
// Network mode proxy: runsc's network is none (loopback only), and moat's
// own binary, bound in, is the container's first process: it listens on
// 127.0.0.1:ProxyPort and relays to moat's proxy through a unix socket
// bound in from the host, then runs the command (forward_linux.go).
//
// What it refuses today: a caller that is not root (rootless runsc has no
// network isolation of its own), an overlay workspace,
// a disk limit, memory, process and CPU limits (runsc would apply them to
// cgroups moat does not create), TCP port rules (Landlock's; gVisor has no
// Landlock), and a stack of several seccomp filters or one a runsc filter
// cannot express. What gVisor does differently where it runs: the
// seccomp profile is applied by the sentry to the command's system calls
// (a refused call gets EPERM, or ENOSYS where the profile says so; a
// call the profile kills on kills the calling thread), the denials are
// not observed, /proc is the sentry's own, and Landlock does not apply
// (the mounts decide what exists).
//
// Finding runsc (Find): [sandbox] runsc in the policy, $MOAT_RUNSC, the
// cache scripts/runsc.sh builds into, then PATH.
package gvisor
