//go:build !linux

package daemon

import (
	"errors"
	"fmt"
	"os"
)

func mountTmpfs(string, int64) error {
	return fmt.Errorf("mount a tmpfs on the workspace: %w", errors.ErrUnsupported)
}

func unmountWorkspace(string) {}

func tmpfsFull(*os.File, int64) bool { return false }
