//go:build !linux

package sandbox

import (
	"errors"
	"os"
)

var errChanged = errors.New("changed since its policy was trusted")

// pinnedProgram runs nothing from a copy here: the program runs by path.
func pinnedProgram(path, digest string) (*os.File, error) { return nil, nil }
