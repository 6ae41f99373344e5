//go:build !linux

package hostinfo

// Kernel is unknown outside Linux.
func Kernel() string { return "unsupported" }

// UserNamespaces are a Linux feature.
func UserNamespaces() UserNS { return UserNS{Detail: "not Linux"} }

// LandlockABI is 0 outside Linux.
func LandlockABI() int { return 0 }

// Seccomp is unavailable outside Linux.
func Seccomp() bool { return false }

// Missing is nil outside Linux, where nothing runs at all.
func Missing() []string { return nil }

// KernelVersion is 0, 0 outside Linux.
func KernelVersion() (major, minor int) { return 0, 0 }
