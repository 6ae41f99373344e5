package seccomp

import "github.com/moatbox/moat/internal/hostinfo"

// kernelVersion is the running kernel's version, or the zero value if uname
// fails or its release does not start with "major.minor".
func kernelVersion() KernelVersion {
	major, minor := hostinfo.KernelVersion()
	return KernelVersion{Major: major, Minor: minor}
}
