package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
)

// watchedConn is a connection to the daemon that tells whoever is
// watching it (an Interactive exec) when reading from it fails: the
// daemon closed it, or died. net/http's transport, whose reader sees that
// first, waits before it returns for its writer, which is reading the
// Interactive's request body, open until the command ends: without this,
// a daemon gone before the answer's first byte left the exec waiting for
// ever.
type watchedConn struct {
	net.Conn
	onFail atomic.Pointer[func()]
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		if f := c.onFail.Load(); f != nil {
			(*f)()
		}
	}
	return n, err
}

// dialWatched is a transport's DialContext: it dials the unix socket
// path, or, with path "", the address the transport asks for.
func dialWatched(path string, own bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if path != "" {
			network, addr = "unix", path
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if own {
			if err := checkOwnDaemon(c, path); err != nil {
				c.Close()
				return nil, err
			}
		}
		return &watchedConn{Conn: c}, nil
	}
}

// checkOwnDaemon refuses a connection to a daemon run by neither the
// caller nor root (UnixOwn). Where the serving uid cannot be known (off
// Linux, where the daemon does not run) it lets the connection be.
func checkOwnDaemon(c net.Conn, path string) error {
	uid, err := peerUID(c)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return nil
	case err != nil:
		return fmt.Errorf("%s: who serves it cannot be told (%v): %w", path, err, ErrForeignDaemon)
	case uid != os.Geteuid() && uid != 0:
		return fmt.Errorf("%w: %s is served by uid %d, neither you nor root: another user made it where your daemon's socket goes; remove it (and its directory) or name your daemon's socket with --socket or $MOAT_SOCKET", ErrForeignDaemon, path, uid)
	}
	return nil
}
