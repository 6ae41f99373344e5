//go:build !linux

package httpapi

import (
	"errors"
	"fmt"
	"net"
)

// peerUID is not implemented here: a unix socket peer stays unknown, and
// its requests are refused.
func peerUID(*net.UnixConn) (int, error) {
	return -1, fmt.Errorf("peer credentials: %w", errors.ErrUnsupported)
}
