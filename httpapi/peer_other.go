//go:build !linux

package httpapi

import (
	"errors"
	"fmt"
	"net"
)

// peer is not implemented here: a unix socket peer stays unknown, and its
// requests are refused.
func peer(*net.UnixConn) (int, string, error) {
	return -1, "", fmt.Errorf("peer credentials: %w", errors.ErrUnsupported)
}
