//go:build !linux

package native

import "errors"

// IsInit is false where the native backend does not exist.
func IsInit() bool { return false }

// MaybeInit does nothing outside Linux.
func MaybeInit() {}

// CheckIDMap is unsupported outside Linux.
func CheckIDMap(dir string, hostUID, hostGID int) error { return errors.ErrUnsupported }

// UsableLandlockABI is 0 outside Linux.
func UsableLandlockABI() int { return 0 }

// NprocPerUserns is false outside Linux.
func NprocPerUserns() bool { return false }
