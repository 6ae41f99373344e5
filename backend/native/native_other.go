//go:build !linux

package native

// IsInit is false where the native backend does not exist.
func IsInit() bool { return false }

// MaybeInit does nothing outside Linux.
func MaybeInit() {}
