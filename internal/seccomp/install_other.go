//go:build !linux

package seccomp

import (
	"errors"
	"fmt"
)

// ErrNoNewPrivs is returned by Install when no_new_privs is not set.
var ErrNoNewPrivs = errors.New("seccomp: no_new_privs is not set")

// Install is supported on Linux only.
func Install(prog []Instruction) error {
	return fmt.Errorf("seccomp: install filter: %w", errors.ErrUnsupported)
}
