// Package hostinfo reads what the running kernel offers moat: user
// namespaces, Landlock, seccomp, the system calls every sandbox needs. It
// only reads (/proc, /sys and probing system calls that change nothing);
// deciding what to do about a missing feature belongs to the caller.
package hostinfo

// NeedKernel is what to do when Missing is not empty.
const NeedKernel = "moat needs Linux 5.12 or later (inside a container, also a seccomp profile that allows these calls)"

// UserNS describes whether this caller can create user namespaces.
type UserNS struct {
	Usable bool
	Detail string
}
