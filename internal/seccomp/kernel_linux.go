package seccomp

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// kernelVersion is the running kernel's version, or the zero value if uname
// fails or its release does not start with "major.minor".
func kernelVersion() KernelVersion {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return KernelVersion{}
	}
	var k KernelVersion
	if _, err := fmt.Sscanf(unix.ByteSliceToString(uts.Release[:]), "%d.%d", &k.Major, &k.Minor); err != nil {
		return KernelVersion{}
	}
	return k
}
