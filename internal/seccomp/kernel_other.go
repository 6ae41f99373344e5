//go:build !linux

package seccomp

// kernelVersion is the zero value off Linux: a Docker profile's minKernel
// conditions then never hold.
func kernelVersion() KernelVersion { return KernelVersion{} }
