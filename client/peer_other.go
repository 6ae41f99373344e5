//go:build !linux

package client

import (
	"errors"
	"net"
)

// peerUID is unknown off Linux, where moat's daemon does not run.
func peerUID(net.Conn) (int, error) { return -1, errors.ErrUnsupported }
