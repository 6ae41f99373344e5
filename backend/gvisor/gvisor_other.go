//go:build !linux

package gvisor

import (
	"context"
	"errors"

	"github.com/moatbox/moat/backend"
)

// Run fails: runsc runs on Linux only.
func (*Backend) Run(context.Context, *backend.Spec, backend.Stdio) (*backend.ExitStatus, error) {
	return nil, errors.ErrUnsupported
}

// MaybeForward does nothing outside Linux.
func MaybeForward() {}

// Create fails: runsc runs on Linux only.
func (*Backend) Create(context.Context, *backend.Spec, backend.Stdio) (backend.Instance, error) {
	return nil, errors.ErrUnsupported
}

func capabilities() backend.Capabilities {
	const why = "runsc runs on Linux only"
	return backend.Capabilities{MemoryWhy: why, PidsWhy: why, CPUWhy: why}
}
