//go:build !linux

package daemon

import (
	"errors"
	"fmt"
)

func mountTmpfs(string, int64) error {
	return fmt.Errorf("mount a tmpfs on the workspace: %w", errors.ErrUnsupported)
}

func unmountWorkspace(string) {}
