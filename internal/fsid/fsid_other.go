//go:build !linux

package fsid

import (
	"errors"
	"fmt"
)

// Take is Linux's alone.
func Take(uid, gid int, groups []int) (restore func() error, err error) {
	return nil, fmt.Errorf("take the filesystem identity of uid %d: %w", uid, errors.ErrUnsupported)
}

// Do is Linux's alone.
func Do(uid, gid int, groups []int, fn func()) error {
	_, err := Take(uid, gid, groups)
	return err
}
